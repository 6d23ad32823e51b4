import pytest
from hypothesis import given, strategies as st

from netem.config import ConfigError, DirectionConfig, LinkConfig


def test_units_are_parsed_into_base_units():
    d = DirectionConfig(delay="20ms", jitter="250us", rate="800mbit", queue="64MiB", loss="0.1%", correlation="25%",
                        jitter_dist="pareto-normal", window="4MiB", rtt="40ms")
    assert (d.delay_s, d.jitter_s, d.rate_bps, d.queue_bytes) == (pytest.approx(0.02), pytest.approx(250e-6), 8e8, 64 * 2**20)
    assert (d.loss, d.correlation, d.jitter_dist) == (pytest.approx(0.001), pytest.approx(0.25), "paretonormal")
    assert (d.window_bytes, d.rtt_s) == (4 * 2**20, pytest.approx(0.04))


def test_defaults_shape_nothing():
    d = DirectionConfig()
    assert (d.delay_s, d.jitter_s, d.rate_bps, d.loss, d.window_bytes, d.slow_start) == (0.0, 0.0, None, 0.0, None, False)


def test_patch_applies_both_then_each_side():
    c = LinkConfig().patched({"both": {"delay": "10ms", "rate": "1gbit"}, "down": {"delay": "30ms"}})
    assert c.up.delay_s == pytest.approx(0.01) and c.down.delay_s == pytest.approx(0.03)
    assert c.up.rate_bps == c.down.rate_bps == 1e9
    assert c.patched({"up": {"rate": None}}).up.rate_bps is None


@pytest.mark.parametrize(
    "patch, message",
    [
        ({"up": {"delay": "-5ms"}}, "duration"),
        ({"up": {"rate": "0mbit"}}, "greater than 0"),
        ({"up": {"jitter_dist": "cauchy"}}, "uniform"),
        ({"up": {"bandwidth": "1gbit"}}, "unknown field"),
        ({"left": {}}, "unknown key"),
        ({"up": "fast"}, "object"),
    ],
)
def test_bad_patches_name_the_problem(patch, message):
    with pytest.raises(ConfigError, match=message):
        LinkConfig().patched(patch)


def test_rtt_defaults_to_the_sum_of_both_delays():
    c = LinkConfig.model_validate({"up": {"delay": "30ms"}, "down": {"delay": "10ms", "rtt": "100ms"}})
    assert c.rtt("up") == pytest.approx(0.04)
    assert c.rtt("down") == pytest.approx(0.1)


@given(st.floats(0, 10), st.floats(1e3, 1e12))
def test_numbers_pass_through_as_base_units(delay, rate):
    d = DirectionConfig(delay=delay, rate=rate)
    assert d.delay_s == delay and d.rate_bps == rate
    assert DirectionConfig.model_validate(d.model_dump()) == d


def test_attributes_carry_units_and_the_api_keeps_its_short_names():
    d = DirectionConfig(delay="20ms", rate_bps="1gbit", queue="1MiB")  # either name on input
    assert (d.delay_s, d.rate_bps, d.queue_bytes) == (pytest.approx(0.02), 1e9, 2**20)
    shown = d.model_dump(by_alias=True)  # what GET /config answers
    assert (shown["delay"], shown["rate"], shown["queue"]) == (pytest.approx(0.02), 1e9, 2**20)
    assert "delay_s" not in shown and DirectionConfig.model_validate(shown) == d
    assert d.updated({"delay_s": "5ms", "rate": None}) == d.updated({"delay": "5ms", "rate_bps": None})
