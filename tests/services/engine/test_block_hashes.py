"""Chained block hashes (docs/engine.md, "Block hashes")."""

import numpy as np
from hypothesis import given, settings, strategies as st

from services.engine.block_hashes import block_hashes, extend_block_hashes

BS = 4


def test_hashes_chain_over_every_previous_block():
    base = block_hashes(list(range(16)), BS)
    changed_first = block_hashes([99] + list(range(1, 16)), BS)
    assert all(a != b for a, b in zip(base, changed_first))
    assert block_hashes(list(range(16)) + [5, 6], BS) == base  # a partial block has no hash
    assert extend_block_hashes(block_hashes(list(range(9)), BS), list(range(16)), BS) == base


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**20), max_size=300), st.sampled_from([1, 4, 16]))
def test_hashing_piecewise_or_from_an_array_gives_the_same_chain(ids, block_size):
    whole = block_hashes(ids, block_size)
    assert block_hashes(np.asarray(ids, dtype=np.int64), block_size) == whole
    grown: list[int] = []
    for end in range(0, len(ids) + 1, 7):  # small steps take the scalar path, the first call may not
        extend_block_hashes(grown, ids[:end], block_size)
    assert extend_block_hashes(grown, ids, block_size) == whole
