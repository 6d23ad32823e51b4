import pytest
from hypothesis import given, strategies as st

from netem.units import parse_duration, parse_fraction, parse_rate, parse_size


@pytest.mark.parametrize(
    "text, seconds",
    [("20ms", 0.02), ("250us", 250e-6), ("1.5s", 1.5), ("3", 3.0), ("2min", 120.0)],
)
def test_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text, bps", [("800mbit", 8e8), ("20gbit", 2e10), ("100kbit", 1e5), ("1Gbit", 1e9), ("10MB/s", 8e7)]
)
def test_rates(text, bps):
    assert parse_rate(text) == pytest.approx(bps)


@pytest.mark.parametrize("text, size", [("64MiB", 64 * 2**20), ("1KB", 1000), ("2GiB", 2 * 2**30), ("17", 17)])
def test_sizes(text, size):
    assert parse_size(text) == size


def test_fraction_percent():
    assert parse_fraction("0.1%") == pytest.approx(0.001)
    with pytest.raises(ValueError, match="outside"):
        parse_fraction("150%")


@pytest.mark.parametrize("bad", ["", "ms", "20 parsecs", "fast", "-3ms"])
def test_bad_durations_name_the_problem(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


@given(st.text(max_size=12))
def test_arbitrary_text_never_crashes_otherwise(text):
    for parser in (parse_duration, parse_rate, parse_size):
        try:
            parser(text)
        except ValueError:
            pass
