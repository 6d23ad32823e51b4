"""The mesh's tokenizer as a Hugging Face `tokenizers` file, for tools that count tokens.

aiperf, guidellm, inference-perf and similar clients load a tokenizer by name or
path to count prompt and output tokens, and some build a prompt of N tokens by
encoding a book and decoding N of its ids. Without hub access they need a local
tokenizer, and it must number tokens as the mesh does (services/engine/tokens.py):
text split on whitespace; a piece that is a pseudo-word is that word's id; any
other piece is one token per UTF-8 byte. So `decode(ids[:N])` is a text the mesh
reads as exactly those N ids, and nothing becomes `<unk>`.

Built from stock parts: each piece is mapped to GPT-2's printable byte alphabet
(ByteLevel), then a BPE model looks the whole piece up in the vocabulary and
otherwise splits it into its bytes, the first byte as itself and the rest with
the WordPiece continuation prefix `##`; its only merges join a leading MARK to
the byte after it (services/engine/pieces.py says why). Decoding writes MARK
before each first byte, joins pieces with one space (WordPiece), then maps the
byte alphabet back (ByteLevel).
"""

from __future__ import annotations

import json
from pathlib import Path

from services.engine.pieces import BYTE_ALPHABET, CONTINUATION, MARK
from services.engine.tokens import WordTokenizer
from services.types import MissingExtra

def vocabulary(vocab_size: int) -> dict[str, int]:
    """Token string -> id: the words, then each byte as a piece's first byte, then as a continuation."""
    words = WordTokenizer(vocab_size)
    vocab = {words.token_text(i)[:-1]: i for i in range(vocab_size)}
    for value, char in enumerate(BYTE_ALPHABET):
        vocab[char] = words.bytes.first + value
        vocab[CONTINUATION + char] = words.bytes.more + value
        vocab[_MARK + char] = words.bytes.marked + value
    return vocab


_MARK = BYTE_ALPHABET[ord(MARK)]


def merges() -> list[tuple[str, str]]:
    """MARK and the byte after it make one token, the marked first byte: the only merges there are."""
    return [(_MARK, CONTINUATION + char) for char in BYTE_ALPHABET]


def build(vocab_size: int):
    try:
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers  # the `tokenizer` extra
    except ImportError:
        raise MissingExtra("pdd-emu tokenizer export", "tokenizers", "tokenizer") from None

    model = models.BPE(vocabulary(vocab_size), merges(), continuing_subword_prefix=CONTINUATION, ignore_merges=True)
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),  # whitespace only, no punctuation rule
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.Sequence([
        decoders.Replace(Regex("^(?=.$)"), _MARK),  # MARK before each first byte (a one-character name)
        decoders.WordPiece(prefix=CONTINUATION, cleanup=False),  # one space before each piece's first token
        decoders.Replace(Regex(f"^{CONTINUATION}"), _MARK),  # a text's first token, if a continuation, as a first byte
        decoders.Replace(" ", "Ġ"),  # that space in the byte alphabet, so ByteLevel maps every character back
        decoders.ByteLevel()])
    return tokenizer


def export(directory: Path, model_name: str, vocab_size: int, max_context: int) -> list[Path]:
    """Write tokenizer.json and the config transformers' AutoTokenizer reads; return the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer_file = directory / "tokenizer.json"
    build(vocab_size).save(str(tokenizer_file))
    config_file = directory / "tokenizer_config.json"
    config_file.write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_context,
        "clean_up_tokenization_spaces": False, "name_or_path": f"pdd-emu/{model_name}"}, indent=2))
    return [tokenizer_file, config_file]
