"""The mesh's word-level tokenizer as a Hugging Face `tokenizers` file, for tools that count tokens.

aiperf, guidellm and similar clients load a tokenizer by name or path to count
prompt and output tokens. Without hub access they need a local one, and it must
count as the mesh does: one token per whitespace-separated piece, each
pseudo-word its own id (services/engine/tokens.py). The exported vocabulary is
exactly the mesh's words, so the ids agree for every pseudo-word; a piece that
is not one gets `<unk>` here, where the mesh hashes it into the vocabulary, so
such text gets the same token count but not the same ids.
"""

from __future__ import annotations

import json
from pathlib import Path

from services.engine.tokens import WordTokenizer
from services.types import MissingExtra

UNKNOWN = "<unk>"


def build(vocab_size: int):
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # the `tokenizer` extra
    except ImportError:
        raise MissingExtra("pdd-emu tokenizer export", "tokenizers", "tokenizer") from None

    words = WordTokenizer(vocab_size)
    vocab = {words.token_text(i).rstrip(" "): i for i in range(vocab_size)}
    vocab[UNKNOWN] = vocab_size
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=UNKNOWN))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # str.split(): whitespace only, no punctuation rule
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with one space
    tokenizer.add_special_tokens([UNKNOWN])
    return tokenizer


def export(directory: Path, model_name: str, vocab_size: int, max_context: int) -> list[Path]:
    """Write tokenizer.json and the config transformers' AutoTokenizer reads; return the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer_file = directory / "tokenizer.json"
    build(vocab_size).save(str(tokenizer_file))
    config_file = directory / "tokenizer_config.json"
    config_file.write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": UNKNOWN, "model_max_length": max_context,
        "clean_up_tokenization_spaces": False, "name_or_path": f"pdd-emu/{model_name}"}, indent=2))
    return [tokenizer_file, config_file]
