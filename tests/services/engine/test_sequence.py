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
