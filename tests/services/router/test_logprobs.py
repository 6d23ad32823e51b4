"""Emulated logprobs: stable, at most 0, a valid distribution, sorted alternatives."""

from __future__ import annotations

import math

from services.router.logprobs import token_logprob, top_logprobs


def test_a_logprob_is_a_stable_function_of_prompt_position_and_token():
    assert token_logprob(11, 3, 42) == token_logprob(11, 3, 42)
    values = {token_logprob(fp, pos, 42) for fp in range(5) for pos in range(20)}
    assert len(values) > 90 and all(v <= 0 for v in values)


def test_top_logprobs_are_sorted_distinct_and_sum_to_at_most_one():
    for position in range(200):
        top = top_logprobs(99, position, 7, 5, 1000)
        assert len(top) == 5 and len({t for t, _ in top}) == 5
        values = [v for _, v in top]
        assert values == sorted(values, reverse=True) and all(v <= 0 for v in values)
        assert sum(math.exp(v) for v in values) <= 1 + 1e-9


def test_the_chosen_token_appears_with_its_own_logprob_when_it_is_likely():
    seen = 0
    for position in range(200):
        top = dict(top_logprobs(5, position, 7, 3, 1000))
        if 7 in top:
            seen += 1
            assert top[7] == token_logprob(5, position, 7)
    assert seen > 100


def test_no_alternatives_when_none_are_asked():
    assert top_logprobs(1, 1, 1, 0, 1000) == []
