import random

import pytest

from loadgen.hitbins import (
    DEFAULT_HIT_WEIGHTS, HIT_BIN_LABELS, HitDistribution, HitTargetSampler, bin_bounds, hit_bin, normalise_weights,
)


@pytest.mark.parametrize(
    ("hit", "label"),
    [(0.0, "0-90"), (0.8999, "0-90"), (0.9, "90-95"), (0.95, "95-97"), (0.9699, "95-97"), (0.97, "97-98"),
     (0.98, "98-99"), (0.99, "99-99.5"), (0.9949, "99-99.5"), (0.995, "99.5-100"), (1.0, "99.5-100")],
)
def test_bin_edges_are_inclusive_below(hit, label):
    assert HIT_BIN_LABELS[hit_bin(hit)] == label


def test_hit_rate_outside_unit_interval_is_refused():
    with pytest.raises(ValueError):
        hit_bin(1.01)


def test_distribution_counts_shares_and_mean():
    dist = HitDistribution.of([0.0, 0.5, 0.96, 0.999])
    assert dist.counts == (2, 0, 1, 0, 0, 0, 1)
    assert dist.shares[0] == 0.5
    assert dist.mean == pytest.approx((0.5 + 0.96 + 0.999) / 4)
    assert dist.share_above(0.95) == 0.5
    assert dist.as_dict()["bins"]["0-90"] == 0.5


def test_default_target_matches_the_published_shape():
    weights = normalise_weights(DEFAULT_HIT_WEIGHTS)
    above_95 = sum(weights[2:])
    assert 0.70 <= above_95 <= 0.80
    assert len(weights) == 7


def test_weights_must_be_seven_and_positive():
    with pytest.raises(ValueError, match="7 bin weights"):
        normalise_weights([1, 2])
    with pytest.raises(ValueError):
        normalise_weights([0] * 7)


def test_sampler_compensates_for_forced_zero_hits():
    # one in ten requests is a session's first turn (hit 0), as in a workload with 10-turn sessions
    rng = random.Random(7)
    sampler = HitTargetSampler(DEFAULT_HIT_WEIGHTS, rng)
    produced = []
    for i in range(3000):
        hit = 0.0 if i % 10 == 0 else sampler.draw()
        sampler.record(hit)
        produced.append(hit)
    shares = HitDistribution.of(produced).shares
    for share, weight in zip(shares, normalise_weights(DEFAULT_HIT_WEIGHTS)):
        assert share == pytest.approx(weight, abs=0.01)


def test_sampler_draws_inside_the_chosen_bin():
    sampler = HitTargetSampler([0, 0, 0, 0, 0, 1, 0], random.Random(1))
    low, high = bin_bounds(5)
    for _ in range(200):
        value = sampler.draw()
        assert low <= value <= high
        sampler.record(value)
