"""Emulated logprobs: stable, at most 0, a valid distribution, sorted alternatives."""

from __future__ import annotations

import math
import random

from services.engine.tokens import splitmix64
from services.router.logprobs import logprob_row, token_logprob, top_logprobs


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


def _documented_row(fingerprint: int, position: int, token_id: int, k: int, vocab: int):
    """docs/mesh.md's formula read literally: h(F, i, x) hashes the three parts from scratch each time."""
    def h(*parts: int) -> float:
        x = 0
        for part in parts:
            x = splitmix64((x ^ (part & (2**64 - 1))) & (2**64 - 1))
        return x / 2.0**64

    p0 = math.exp(-3.0 * h(fingerprint, position, token_id))
    candidates = {token_id: p0}
    for j in range(1, 4 * k + 8):
        if len(candidates) > k:
            break
        alternative = (token_id + 1 + int(h(fingerprint, position, -j) * (vocab - 1))) % vocab
        candidates.setdefault(alternative, (1.0 - p0) * 0.5 ** j * (0.5 + 0.5 * h(fingerprint, position, j)))
    ranked = sorted(candidates.items(), key=lambda item: (-item[1], item[0]))[:k]
    return math.log(p0), [(t, math.log(max(p, 1e-300))) for t, p in ranked]


def test_a_row_made_from_its_positions_hash_state_is_the_documented_formula_to_the_last_bit():
    draw = random.Random(2)
    for _ in range(500):
        args = (draw.getrandbits(64), draw.randint(-5000, 5000), draw.randrange(128256), draw.randint(0, 20), 128256)
        assert logprob_row(*args) == _documented_row(*args)
        assert (token_logprob(*args[:3]), top_logprobs(*args)) == logprob_row(*args)
