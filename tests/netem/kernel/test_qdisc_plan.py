"""The qdisc plan is pure: which qdiscs, in what tree, with what numbers."""

import pytest

from netem.config import DirectionConfig
from netem.kernel.qdisc import MIN_NETEM_LIMIT, TBF_MAX_BPS, KernelUnsupported, NetemExtras, netem_limit_packets, plan


def kinds(steps):
    return [(s.kind, s.handle, s.parent) for s in steps]


def test_nothing_to_do_plans_nothing():
    assert plan(DirectionConfig()) == []


def test_rate_only_is_a_root_tbf():
    steps = plan(DirectionConfig(rate="800mbit"))
    assert kinds(steps) == [("tbf", "1:", None)]
    assert steps[0].params["rate"] == 100_000_000  # bytes per second


def test_rate_above_tbf_range_uses_htb_with_a_64bit_rate():
    steps = plan(DirectionConfig(rate="40gbit"))
    assert kinds(steps) == [("htb", "1:", None)]
    assert steps[0].class_params["rate"] == "40000000000bit"
    assert TBF_MAX_BPS == pytest.approx(34.36e9, rel=1e-3)


def test_delay_and_rate_stack_netem_over_the_shaper():
    steps = plan(DirectionConfig(delay="20ms", jitter="2ms", correlation="25%", loss="0.1%", rate="1gbit"))
    assert kinds(steps) == [("netem", "1:", None), ("tbf", "10:", "1:1")]
    netem = steps[0].params
    assert (netem["delay"], netem["jitter"]) == (20_000, 2_000)
    assert netem["loss"] == pytest.approx(0.1) and netem["delay_corr"] == pytest.approx(25.0)


def test_netem_limit_holds_twice_the_bdp():
    # 10 gbit x (100 ms + 4 x 5 ms) = 150 MB -> 2 x 150 MB / 1514 B packets
    assert netem_limit_packets(DirectionConfig(rate="10gbit", delay="100ms", jitter="5ms")) == 198_151
    assert netem_limit_packets(DirectionConfig(rate="1mbit", delay="1ms")) == MIN_NETEM_LIMIT


def test_extras_reach_netem():
    steps = plan(DirectionConfig(), NetemExtras(duplicate="1%", reorder="5%", reorder_correlation="50%"))
    assert steps[0].params["duplicate"] == pytest.approx(1.0)
    assert steps[0].params["prob_reorder"] == pytest.approx(5.0)


def test_non_uniform_jitter_is_refused_with_a_way_out():
    with pytest.raises(KernelUnsupported, match="userspace"):
        plan(DirectionConfig(delay="10ms", jitter="1ms", jitter_dist="normal"))


def test_shaper_can_be_chosen():
    assert kinds(plan(DirectionConfig(rate="100mbit"), shaper="htb")) == [("htb", "1:", None)]
    with pytest.raises(KernelUnsupported, match="tbf cannot"):
        plan(DirectionConfig(rate="40gbit"), shaper="tbf")
