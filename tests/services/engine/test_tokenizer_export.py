"""The exported Hugging Face tokenizer counts and numbers tokens exactly as the mesh's tokenizer does."""

from __future__ import annotations

import random
import sys

import pytest
from tokenizers import Tokenizer

from services.engine.tokens import WordTokenizer
from services.profiles import load_model
from tests.services.cli.in_process import cli  # noqa: F401 (fixture)

VOCAB = load_model("llama3-8b").vocab_size


def test_the_cli_writes_a_tokenizer_with_the_mesh_ids(cli, tmp_path):  # noqa: F811
    code, out, _ = cli("tokenizer", "export", str(tmp_path / "tok"))
    assert code == 0 and "tokenizer.json" in out
    exported = Tokenizer.from_file(str(tmp_path / "tok" / "tokenizer.json"))
    mesh = WordTokenizer(VOCAB)
    rng = random.Random(5)
    for _ in range(200):
        ids = [rng.randrange(VOCAB) for _ in range(rng.randint(1, 40))]
        text = mesh.decode(ids)
        spaced = text.replace(" ", rng.choice([" ", "  ", "\n", "\t "]))
        assert exported.encode(spaced).ids == mesh.encode(spaced) == ids
    assert exported.get_vocab_size() == VOCAB + 768  # the words, then first, later and marked first bytes


def _exported(cli, tmp_path) -> Tokenizer:  # noqa: F811
    cli("tokenizer", "export", str(tmp_path))
    return Tokenizer.from_file(str(tmp_path / "tokenizer.json"))


TEXTS = ["Hello, world! 42 tokens; naïve café — x", "日本語 テキスト", "bada ##e ## a \x1c b\u00a0c \x7f \x7fab",
         "", "   \n", "\u2060x ⁰ ##é"]


def test_any_text_gets_the_mesh_ids_and_no_unknown_token(cli, tmp_path):  # noqa: F811
    exported, mesh = _exported(cli, tmp_path), WordTokenizer(VOCAB)
    for text in TEXTS:
        assert exported.encode(text).ids == mesh.encode(text), text
    assert "<unk>" not in exported.get_vocab()


def test_decoding_any_ids_gives_the_mesh_text(cli, tmp_path):  # noqa: F811
    exported, mesh = _exported(cli, tmp_path), WordTokenizer(VOCAB)
    rng = random.Random(7)
    for _ in range(300):
        ids = [rng.randrange(mesh.size) for _ in range(rng.randint(1, 30))]
        assert exported.decode(ids) == mesh.detokenize(ids)


def test_n_ids_cut_from_english_decode_to_a_text_of_n_ids(cli, tmp_path):  # noqa: F811
    # What guidellm and aiperf do to build an N-token prompt: encode a corpus, cut N ids, decode them.
    exported, mesh = _exported(cli, tmp_path), WordTokenizer(VOCAB)
    corpus = exported.encode("It is a truth universally acknowledged, that a single man in possession of a good "
                             "fortune, must be in want of a wife. So to be: fo fox bada").ids
    for start in range(len(corpus)):
        for end in range(start + 1, min(len(corpus), start + 40) + 1):
            text = exported.decode(corpus[start:end])
            assert len(exported.encode(text).ids) == len(mesh.encode(text)) == end - start, text



def test_an_unknown_model_is_a_clear_error(cli, tmp_path):  # noqa: F811
    code, _, err = cli("tokenizer", "export", str(tmp_path), "--model", "no-such-model")
    assert code == 2 and "no-such-model" in err


def test_without_the_tokenizer_extra_the_command_names_the_pip_line(tmp_path, monkeypatch, capsys):
    from services.cli import main

    monkeypatch.setitem(sys.modules, "tokenizers", None)  # `import tokenizers` now raises ImportError
    with pytest.raises(SystemExit) as exit_:
        main(["tokenizer", "export", str(tmp_path)])
    assert exit_.value.code == 2 and "pip install 'pdd-emu[tokenizer]'" in capsys.readouterr().err
    assert not (tmp_path / "tokenizer.json").exists()
