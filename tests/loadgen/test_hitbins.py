import random

import pytest

from loadgen.hitbins import (
    DEFAULT_HIT_WEIGHTS, HIT_BIN_LABELS, HitDistribution, SessionHitTargets, bin_bounds, hit_bin, normalise_weights,
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


def test_whole_sessions_follow_the_mix_their_forced_first_turns_included():
    rng = random.Random(7)
    produced = []
    for _ in range(3000):  # sessions of 10 turns: one in ten requests is a forced miss
        targets = SessionHitTargets(DEFAULT_HIT_WEIGHTS, 10, random.Random(rng.getrandbits(64)))
        produced += [0.0] + [targets.draw() for _ in range(9)]
    shares = HitDistribution.of(produced).shares
    for share, weight in zip(shares, normalise_weights(DEFAULT_HIT_WEIGHTS)):
        assert share == pytest.approx(weight, abs=0.005)


def test_a_session_too_short_for_its_miss_share_keeps_its_later_turns_out_of_that_bin():
    # 12% of 5 turns is under the one forced miss: the later turns draw from the other bins alone
    targets = SessionHitTargets(DEFAULT_HIT_WEIGHTS, 5, random.Random(3))
    assert targets.weights[0] == 0.0
    assert all(hit_bin(targets.draw()) != 0 for _ in range(500))


def test_targets_draw_inside_the_chosen_bin():
    targets = SessionHitTargets([0, 0, 0, 0, 0, 1, 0], 20, random.Random(1))
    low, high = bin_bounds(5)
    for _ in range(200):
        assert low <= targets.draw() <= high
