"""A sequence's block hashes: handed in by the caller or computed, they must be the same chain."""

from __future__ import annotations

import pytest

from services.engine.prefix_cache import block_hashes
from services.engine.sequence import Sequence, SequenceState


@pytest.mark.parametrize("prompt_len, extra", [(1000, 0), (1007, 1), (15, 1), (16, 0)])
def test_handed_in_hashes_are_extended_to_the_whole_context(prompt_len, extra):
    prompt = [(i * 31) % 997 for i in range(prompt_len)]
    context = prompt + [5] * extra
    common = dict(request_id="r", context=context, prompt_len=prompt_len, kv_tokens=prompt_len if extra else 0,
                  generate=3, first_position=extra, seed=1)
    given = block_hashes(prompt, 16)
    state = SequenceState(Sequence(**common, block_hashes=given), 16, 1000, 0.0)
    assert state.hashes == SequenceState(Sequence(**common), 16, 1000, 0.0).hashes == block_hashes(context, 16)
    assert given == block_hashes(prompt, 16)  # the caller's list is not extended in place


@pytest.mark.parametrize("prompt_len", [1, 15, 16, 33])
def test_a_growing_context_keeps_the_chain_of_the_whole_context(prompt_len):
    """The engine keeps only a context's length and the ids past its last full block; grown a token at
    a time and by a handoff's tokens, its chain is still that of every id it was given."""
    prompt = [(i * 7) % 991 for i in range(prompt_len)]
    state = SequenceState(Sequence(request_id="r", context=prompt, prompt_len=prompt_len, kv_tokens=0,
                                   generate=100, first_position=0, seed=1), 16, 1000, 0.0)
    grown = list(prompt)
    for step, ids in enumerate([[3], [4] * 15, [5], [6] * 40, [7], [8] * 16]):
        state.append(ids)
        grown += ids
        assert state.context_len == len(grown)
        assert state.hashes == block_hashes(grown, 16), f"after step {step}"
        assert state.tail == grown[len(state.hashes) * 16 :]
