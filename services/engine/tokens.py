"""Deterministic tokens: a toy word-level tokenizer with byte fallback, and a stateless output generator.

The emulator never runs a model, yet clients must be able to check that a
handoff between instances lost or repeated nothing. So the token at output
position i is a pure function of (prompt fingerprint, i, seed): any instance
that continues a request produces the same text (docs/engine.md, "Tokens").

Text is split on whitespace; a piece that spells a pseudo-word of the vocabulary
is that word's id, and any other piece is one token per UTF-8 byte, numbered
past the words (`ByteIds`), so every text has ids and a count that a client's
copy of this tokenizer (services/engine/tokenizer_export.py) agrees with.
"""

from __future__ import annotations

import hashlib

import numpy as np

from services.engine.pieces import ByteIds, split
from services.types import TokenId

_MASK64 = (1 << 64) - 1
_GOLDEN64 = 0x9E3779B97F4A7C15

# Pseudo-words are consonant-vowel syllables; an id is written in base 80 with
# one syllable per digit, most significant first, so words are short and unique.
_CONSONANTS = "bdfghjklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES = tuple(c + v for c in _CONSONANTS for v in _VOWELS)
_SYLLABLE_DIGIT = {s: i for i, s in enumerate(_SYLLABLES)}
_BASE = len(_SYLLABLES)
# Every pair of syllables (two digits, zero-padded) and the canonical words below _BASE**2: a word is
# then a few table lookups, cheap enough to spell on first use rather than a whole vocabulary up front.
_PAIRS = tuple(a + b for a in _SYLLABLES for b in _SYLLABLES)
_SHORT = _SYLLABLES + _PAIRS[_BASE:]
_PAIR_BASE = _BASE * _BASE
# Pieces remembered by one tokenizer: more than any vocabulary in services/profiles/models.yaml, so a
# prompt of pseudo-words or of ordinary text maps mostly from memory; about 40 MB when full, then cleared.
_MEMO_PIECES = 1 << 18


def splitmix64(x: int) -> int:
    """One round of splitmix64: a cheap, well-mixed 64-bit bijection."""
    x = (x + _GOLDEN64) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _word_for(token_id: int) -> str:
    if token_id < _PAIR_BASE:
        return _SHORT[token_id]
    high, low = divmod(token_id, _PAIR_BASE)
    # Every vocabulary in services/profiles/models.yaml is below _PAIR_BASE**2: one level, no recursion.
    return (_SHORT[high] if high < _PAIR_BASE else _word_for(high)) + _PAIRS[low]


def _id_for(word: str) -> int | None:
    """The id a pseudo-word spells, or None if the piece is not one."""
    if len(word) % 2 or not word or (len(word) > 2 and word[:2] == _SYLLABLES[0]):
        return None  # a leading zero syllable never appears in a canonical word
    value = 0
    for i in range(0, len(word), 2):
        digit = _SYLLABLE_DIGIT.get(word[i : i + 2])
        if digit is None:
            return None
        value = value * _BASE + digit
    return value


def word_id(word: str) -> int | None:
    """The id a pseudo-word spells, or None if `word` is not one (a client reading streamed text uses this)."""
    return _id_for(word)


class WordTokenizer:
    """Whitespace pieces to ids over `vocab_size` pseudo-words; any other piece is its UTF-8 bytes (ByteIds)."""

    def __init__(self, vocab_size: int) -> None:
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be at least 2, got {vocab_size}")
        self.vocab_size = vocab_size
        self.bytes = ByteIds(vocab_size)
        self.size = self.bytes.end  # every id this tokenizer writes is below it
        self._texts: dict[int, str] = {}
        # piece -> its id or ids: text repeats its pieces, and mapping one costs microseconds
        self._words: dict[str, TokenId] = {}  # pieces of one token (words, mostly)
        self._ids: dict[str, tuple[TokenId, ...]] = {}  # pieces of several byte tokens

    def token_text(self, token_id: TokenId) -> str:
        """The word for `token_id` followed by one space, so streamed pieces concatenate to decode().

        Spelled on first use and remembered: a word is a few table lookups (`_word_for`), so a
        router spells only the words it streams, not its whole vocabulary at start.
        """
        text = self._texts.get(token_id)
        if text is None:
            if not 0 <= token_id < self.size:
                raise ValueError(f"token id {token_id} is outside the vocabulary of {self.size}")
            text = self._texts[token_id] = _word_for(token_id) + " " if token_id < self.vocab_size else \
                bytes([(token_id - self.vocab_size) % 256]).decode("utf-8", "replace")
        return text

    def decode(self, ids: list[TokenId]) -> str:
        """Each piece followed by one space, as streamed; a run of byte tokens is the piece it spells."""
        if all(i < self.vocab_size for i in ids):
            return "".join(self.token_text(i) for i in ids)
        return "".join(piece + " " for piece in self.detokenize(ids).split(" "))

    def token_name(self, token_id: TokenId) -> str:
        """The token's name in the exported tokenizer (vLLM's `token_strs`): its word, or its byte's name."""
        if token_id < self.vocab_size:
            return self.token_text(token_id)[:-1]
        self.token_text(token_id)  # the range check
        return self.bytes.name(token_id)

    def detokenize(self, ids: list[TokenId]) -> str:
        """The text the exported tokenizer's decode gives: the pieces joined by one space.

        As its WordPiece decoder does, a continuation byte joins the piece before it, whatever that is;
        a first byte, and a continuation that comes first, has MARK before it (ByteIds); the bytes are
        read as UTF-8 once, bad ones as U+FFFD.
        """
        pieces: list[bytearray] = []
        for i, token_id in enumerate(ids):
            if token_id < self.vocab_size:
                pieces.append(bytearray(self.token_text(token_id)[:-1].encode()))
            elif not token_id < self.size:
                raise ValueError(f"token id {token_id} is outside the vocabulary of {self.size}")
            elif i and self.bytes.more <= token_id < self.bytes.marked:
                pieces[-1].append(token_id - self.bytes.more)
            else:  # a first byte, or a continuation that comes first: MARK before it (ByteIds)
                pieces.append(bytearray([0x7F, (token_id - self.bytes.first) % 256]))
        return b" ".join(pieces).decode("utf-8", "replace")

    def encode(self, text: str) -> list[TokenId]:
        pieces = split(text)
        try:  # every piece remembered as one token (a text of words seen before): one lookup each
            return [self._words[piece] for piece in pieces]
        except KeyError:
            return self._encode_new(pieces)

    def _encode_new(self, pieces: list[str]) -> list[TokenId]:
        words, others = self._words, self._ids
        if len(words) + len(others) > _MEMO_PIECES:
            words.clear()
            others.clear()
        out: list[TokenId] = []
        for piece in pieces:
            one = words.get(piece)
            if one is not None:
                out.append(one)
                continue
            ids = others.get(piece)
            if ids is None:
                ids = self._piece_ids(piece)
                if len(ids) == 1:
                    words[piece] = ids[0]
                else:
                    others[piece] = ids
            out.extend(ids)
        return out

    def _piece_ids(self, piece: str) -> tuple[TokenId, ...]:
        known = _id_for(piece)
        if known is not None and known < self.vocab_size:
            return (known,)
        return self.bytes.of(piece)


def prompt_fingerprint(prompt_ids: list[TokenId] | np.ndarray) -> int:
    """A stable 64-bit hash of the prompt, the same in every process and on every host."""
    data = np.asarray(prompt_ids, dtype="<i8").tobytes()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def stream_key(fingerprint: int, seed: int) -> int:
    """The per-request key of the output stream; engines compute it once per sequence."""
    return splitmix64((fingerprint ^ splitmix64(seed & _MASK64)) & _MASK64)


def token_at(key: int, position: int, vocab_size: int) -> TokenId:
    """The output token at `position` of the stream `key` (see stream_key)."""
    # splitmix64 written out: this runs once per generated token.
    x = (key + (position + 1) * _GOLDEN64) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (x ^ (x >> 31)) % vocab_size


def output_token(fingerprint: int, position: int, seed: int, vocab_size: int) -> TokenId:
    """The token at output position `position`: a function of (fingerprint, position, seed) only."""
    return token_at(stream_key(fingerprint, seed), position, vocab_size)
