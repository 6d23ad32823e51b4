"""RecentPrompts: a prompt met again is not hashed again, and only the very same ids are."""

from __future__ import annotations

import numpy as np
import pytest

from services.engine.block_hashes import block_hashes
from services.engine.prompt_memo import RecentPrompts

BLOCK = 16


def _prompt(seed: int, length: int = 1000) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 32000, length, dtype=np.int32)


def test_the_same_ids_again_are_a_hit_with_the_same_hashes():
    memo, ids = RecentPrompts(), _prompt(1)
    first = memo.hashes(ids, 7, BLOCK)
    again = memo.hashes(ids.copy(), 7, BLOCK)  # another array of equal ids, as each service unpacks its own
    assert first == block_hashes(ids, BLOCK) and again is first
    assert (memo.misses, memo.hits) == (1, 1)


def test_a_fingerprint_collision_is_hashed_afresh():
    memo, ids, other = RecentPrompts(), _prompt(1), _prompt(2)
    memo.hashes(ids, 7, BLOCK)
    assert memo.hashes(other, 7, BLOCK) == block_hashes(other, BLOCK)  # same fingerprint and length, other ids
    assert (memo.misses, memo.hits) == (2, 0)


def test_block_size_is_part_of_the_key():
    memo, ids = RecentPrompts(), _prompt(1)
    memo.hashes(ids, 7, BLOCK)
    assert memo.hashes(ids, 7, 32) == block_hashes(ids, 32)
    assert memo.hits == 0


def test_the_least_recently_used_prompt_leaves_first():
    memo = RecentPrompts(size=2)
    a, b, c = _prompt(1), _prompt(2), _prompt(3)
    memo.hashes(a, 1, BLOCK)
    memo.hashes(b, 2, BLOCK)
    memo.hashes(a, 1, BLOCK)  # a is now the most recent
    memo.hashes(c, 3, BLOCK)  # b leaves
    memo.hashes(a, 1, BLOCK)
    assert memo.hits == 2
    memo.hashes(b, 2, BLOCK)
    assert (memo.misses, memo.hits) == (4, 2)


def test_a_memo_holds_at_least_one_prompt():
    with pytest.raises(ValueError, match="at least one"):
        RecentPrompts(size=0)
