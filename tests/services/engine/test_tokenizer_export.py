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
    assert exported.get_vocab_size() == VOCAB + 1  # the words, and <unk>


def test_text_that_is_not_pseudo_words_still_counts_the_same(cli, tmp_path):  # noqa: F811
    cli("tokenizer", "export", str(tmp_path))
    exported = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    text = "Hello, world! 42 tokens; naïve café — x"
    assert len(exported.encode(text).ids) == len(WordTokenizer(VOCAB).encode(text)) == len(text.split())


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
