"""Chained block hashes: the names under which a prefix's KV blocks are published and looked up.

Stable across processes and hosts, so one service can tell another which prefix it holds
(docs/engine.md, "Block hashes").
"""

from __future__ import annotations

import numpy as np

from services.engine.tokens import splitmix64
from services.types import TokenId

DEFAULT_BLOCK_SIZE = 16
_MASK64 = (1 << 64) - 1
_SCALAR_TOKENS = 64
_ROOT_HASH = 0x5044_4445_4D55_0001  # parent of the first block; any fixed value works


def block_hashes(token_ids: list[TokenId] | np.ndarray, block_size: int = DEFAULT_BLOCK_SIZE) -> list[int]:
    """Chained 64-bit hashes of the full blocks of `token_ids`; block i depends on blocks 0..i.

    Stable across processes and hosts, so one service can tell another which prefix it holds.
    """
    return extend_block_hashes([], token_ids, block_size)


def extend_block_hashes(hashes: list[int], token_ids: list[TokenId] | np.ndarray, block_size: int,
                        offset: int = 0) -> list[int]:
    """Append to `hashes` (the chain of token_ids' first len(hashes) blocks) the hashes of the remaining full blocks.

    The hash of block i is the running sum (mod 2**64) of splitmix64(token << 32 | position)
    over every token up to the end of block i: it depends on all previous blocks and on
    positions, and one vectorised pass hashes a 100K-token prompt (docs/engine.md, "Block hashes").
    `offset` is the position of token_ids[0], at most len(hashes) * block_size: a caller may keep
    only the tokens past the blocks it has hashed.
    """
    full_blocks = (offset + len(token_ids)) // block_size
    if full_blocks <= len(hashes):
        return hashes
    start = len(hashes) * block_size
    end = full_blocks * block_size
    running = hashes[-1] if hashes else _ROOT_HASH
    segment = token_ids[start - offset : end - offset]
    if end - start <= _SCALAR_TOKENS:  # a block or two (a decoding sequence): numpy's setup would dominate
        if isinstance(segment, np.ndarray):
            segment = segment.tolist()
        for position, token in enumerate(segment, start):
            running = (running + splitmix64((token << 32) | position)) & _MASK64
            if (position + 1) % block_size == 0:
                hashes.append(running)
        return hashes
    if isinstance(segment, np.ndarray):
        tokens = segment.astype(np.uint64)
    else:
        tokens = np.fromiter(segment, dtype=np.uint64, count=end - start)
    positions = np.arange(start, end, dtype=np.uint64)
    mixed = _splitmix64_array((tokens << np.uint64(32)) | positions)
    sums = np.cumsum(mixed, dtype=np.uint64)[block_size - 1 :: block_size]  # wraps mod 2**64
    sums += np.uint64(running)
    hashes.extend(sums.tolist())
    return hashes


def _splitmix64_array(x: np.ndarray) -> np.ndarray:
    """tokens.splitmix64 on every element of a uint64 array."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))
