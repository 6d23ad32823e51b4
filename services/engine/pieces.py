"""How text becomes pieces, and a piece that is no word becomes byte tokens (services/engine/tokens.py).

Both halves are spelled as the exported Hugging Face tokenizer does it
(services/engine/tokenizer_export.py), so the two agree on every text: pieces
are what Rust's `char::is_whitespace` separates, and a piece's bytes are named
in GPT-2's byte alphabet, its second and later bytes with the `##` prefix.
"""

from __future__ import annotations

import re

from services.types import TokenId


def _byte_alphabet() -> tuple[str, ...]:
    """GPT-2's printable stand-in for each byte (the `ByteLevel` of Hugging Face tokenizers): printable
    Latin-1 bytes stand for themselves, the other 68 take U+0100 onwards in byte order."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    others = iter(range(256, 512))
    return tuple(chr(b) if b in printable else chr(next(others)) for b in range(256))


BYTE_ALPHABET = _byte_alphabet()
CONTINUATION = "##"  # the exported tokenizer's name prefix for a piece's second and later bytes


BYTE_TOKENS = 768  # ids past the words: first bytes, continuation bytes, marked first bytes
MARK = "\x7f"  # DEL: written before a piece of bytes, so that no cut of one reads back as a word


class ByteIds:
    """The byte tokens after `vocab_size` words: a piece's first byte, its later bytes, and a marked first byte.

    A piece that is no word is its UTF-8 bytes: the first as itself, each later one as a continuation
    (named with the `##` prefix), so ids decode back to the same pieces joined by one space. A first
    byte decodes with MARK before it: a client that cuts "fox" after "fo" sends MARK"fo", which is
    two byte tokens again (MARK and the byte after it make one "marked" first byte), where "fo"
    alone would be a word. So a text decoded from N ids is N ids, whatever the cut. The output
    generator draws only words (below `vocab_size`), so generated text is unchanged.
    """

    def __init__(self, vocab_size: int) -> None:
        self.first = vocab_size
        self.more = vocab_size + 256
        self.marked = vocab_size + 512
        self.end = vocab_size + BYTE_TOKENS

    def of(self, piece: str) -> tuple[TokenId, ...]:
        data = piece.encode("utf-8")
        if len(data) == 3 and data[:2] == b"##":
            # "##x" is itself a continuation token's name, and the exported tokenizer looks a whole piece
            # up by name first: one token, as there.
            return (self.more + data[2],)
        if data[0] == 0x7F and len(data) > 1:
            return (self.marked + data[1], *(self.more + b for b in data[2:]))
        return (self.first + data[0], *(self.more + b for b in data[1:]))

    def name(self, token_id: TokenId) -> str:
        """The byte token's name in the exported tokenizer's vocabulary."""
        if token_id < self.more:
            return BYTE_ALPHABET[token_id - self.first]
        if token_id < self.marked:
            return CONTINUATION + BYTE_ALPHABET[token_id - self.more]
        return BYTE_ALPHABET[0x7F] + BYTE_ALPHABET[token_id - self.marked]


# The whitespace the exported tokenizer splits on (Rust's char::is_whitespace): str.split() also splits on
# the four ASCII separators \x1c-\x1f, which are pieces' bytes there, so they are pieces' bytes here too.
_WHITESPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_SPLIT = re.compile(f"[{_WHITESPACE}]+")
_SEPARATORS = re.compile("[\x1c-\x1f]")


def split(text: str) -> list[str]:
    """The pieces of `text`: str.split()'s speed where the text has no ASCII separator in it."""
    if _SEPARATORS.search(text) is None:
        return text.split()
    return [piece for piece in _SPLIT.split(text) if piece]
