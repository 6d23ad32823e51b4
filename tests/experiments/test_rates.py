"""Staircase rate profiles and their arrivals."""

from __future__ import annotations

import random

import pytest

from services.experiments.rates import Step, staircase_profile


def test_windows_follow_ramps_and_settling():
    profile = staircase_profile([Step(2, 30, 10, 20), Step(4, 10, 5, 20)])
    assert [(w.rate, w.start_s, w.end_s) for w in profile.windows] == [(2, 40, 60), (4, 75, 95)]
    assert profile.end_s == 95


def test_arrivals_follow_the_rate_in_each_window():
    profile = staircase_profile([Step(5, 20, 0, 200), Step(20, 10, 0, 200)])
    arrivals = list(profile.arrivals(random.Random(3)))
    assert arrivals == sorted(arrivals) and arrivals[-1] < profile.end_s
    first, second = profile.windows
    count = lambda w: sum(w.start_s <= t < w.end_s for t in arrivals)  # noqa: E731
    assert count(first) / 200 == pytest.approx(5, rel=0.1)
    assert count(second) / 200 == pytest.approx(20, rel=0.1)
    # a linear ramp from 0 to 5 over 20 s carries 50 arrivals on average
    assert sum(t < 20 for t in arrivals) == pytest.approx(50, abs=25)


def test_a_step_needs_a_positive_rate():
    with pytest.raises(ValueError):
        Step(0, 1, 1, 1)
