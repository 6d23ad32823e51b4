"""Length distributions: the residual of a length in progress (docs/loadgen.md, "Users joining")."""

import random
from collections import Counter

import pytest

from loadgen.lengths import LengthDist
from tests.tolerance import assert_close


def residuals(spec: str, draws: int = 30_000) -> Counter:
    dist, rng = LengthDist.model_validate(spec), random.Random(0)
    return Counter(dist.residual(rng) for _ in range(draws))


def test_the_residual_of_a_fixed_length_is_uniform_up_to_it():
    counts = residuals("20")
    assert set(counts) == set(range(1, 21))
    for r in range(1, 21):
        assert_close(counts[r] / 30_000, 1 / 20, rel=0.15, what=f"P(R = {r})")


def test_the_residual_weighs_each_remainder_by_the_lengths_that_reach_it():
    # lengths 1, 2, 3 equally likely (mean 2): P(R = r) = P(L >= r) / E[L] = 1/2, 1/3, 1/6
    counts = residuals("1..3")
    for r, expected in ((1, 1 / 2), (2, 1 / 3), (3, 1 / 6)):
        assert_close(counts[r] / 30_000, expected, rel=0.05, what=f"P(R = {r})")


@pytest.mark.parametrize("spec", ["exp8", "4..40"])
def test_a_residual_never_exceeds_the_longest_length(spec):
    assert max(residuals(spec, 5000)) <= LengthDist.model_validate(spec).maximum
