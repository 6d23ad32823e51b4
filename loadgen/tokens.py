"""Token ids for synthetic prompts: fresh random runs and trace blocks that expand the same way every time.

Prompts are lists of token ids so that prefix reuse is real: two prompts share
KV only where they share leading ids, as a server's radix cache sees them.
"""

from __future__ import annotations

import functools
import hashlib
import random

import numpy as np

from services.engine.tokens import word_id

DEFAULT_VOCAB = 32000  # small enough for any served model's vocabulary
# bounded only by 2**31 so that every pseudo-word decodes, whatever the served model's vocabulary
_WORD_LIMIT = 2**31


def fresh_tokens(rng: random.Random, count: int, vocab: int = DEFAULT_VOCAB) -> list[int]:
    """`count` new token ids; seeded from `rng` so a run repeats exactly."""
    if count <= 0:
        return []
    generator = np.random.default_rng(rng.getrandbits(64))
    return generator.integers(0, vocab, size=count, dtype=np.int64).tolist()


@functools.lru_cache(maxsize=65536)
def _block(seed: int, hash_id: int, block_size: int, vocab: int) -> tuple[int, ...]:
    generator = np.random.default_rng([seed, hash_id, block_size, vocab])
    return tuple(generator.integers(0, vocab, size=block_size, dtype=np.int64).tolist())


def block_tokens(hash_id: int, block_size: int, vocab: int = DEFAULT_VOCAB, seed: int = 0) -> tuple[int, ...]:
    """The `block_size` token ids a trace hash id stands for: a pure function of (seed, id)."""
    if hash_id < 0:
        raise ValueError(f"hash id {hash_id} is negative")
    return _block(seed, hash_id, block_size, vocab)


def expand_hash_ids(
    hash_ids: list[int], input_length: int, block_size: int, vocab: int = DEFAULT_VOCAB, seed: int = 0
) -> list[int]:
    """A trace request's prompt: its blocks in order, the last one cut to `input_length`."""
    tokens: list[int] = []
    for hash_id in hash_ids:
        tokens.extend(block_tokens(hash_id, block_size, vocab, seed))
        if len(tokens) >= input_length:
            break
    if len(tokens) < input_length:
        raise ValueError(f"{len(hash_ids)} blocks of {block_size} cannot hold {input_length} tokens")
    return tokens[:input_length]


def text_token_ids(text: str, vocab: int = DEFAULT_VOCAB) -> list[int]:
    """The ids of a streamed text piece, used when the server sends no token ids.

    pdd-emu's engines write each token as a pseudo-word (services/engine/tokens.py);
    those decode to their exact ids, so a session's next prompt holds the very ids
    the server generated and cached. Any other piece hashes to a stable id below `vocab`.
    """
    return list(_piece_ids(text, vocab))


@functools.lru_cache(maxsize=1 << 18)
def _piece_ids(text: str, vocab: int) -> tuple[int, ...]:
    # A streamed chunk is one word and its space, from a vocabulary the client soon has all of:
    # remembered, its ids cost a lookup instead of a split and a spelling per token received.
    ids = []
    for piece in text.split():  # a streamed chunk holds one piece: this runs once per token received
        token_id = word_id(piece)
        if token_id is None or token_id >= _WORD_LIMIT:
            digest = hashlib.blake2b(piece.encode("utf-8"), digest_size=8).digest()
            token_id = int.from_bytes(digest, "little") % vocab
        ids.append(token_id)
    return tuple(ids)


def common_prefix_length(a: np.ndarray, b: np.ndarray) -> int:
    """Number of leading positions where the two id arrays agree."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def offline_model_output(prompt: list[int], max_tokens: int, vocab: int = DEFAULT_VOCAB) -> list[int]:
    """A stand-in model for offline plans: `max_tokens` ids that depend only on the prompt."""
    digest = hashlib.blake2b(np.asarray(prompt, dtype=np.int64).tobytes(), digest_size=8).digest()
    generator = np.random.default_rng(int.from_bytes(digest, "little"))
    return generator.integers(0, vocab, size=max_tokens, dtype=np.int64).tolist()
