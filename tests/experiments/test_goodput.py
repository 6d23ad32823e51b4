"""Max goodput from a sweep: the 90% crossing between the last passing and the first failing step."""

from __future__ import annotations

import pytest

from services.experiments.goodput import LoadPoint, max_goodput


def test_the_crossing_is_interpolated():
    points = [LoadPoint(20, 1.0, 2.0), LoadPoint(40, 0.95, 3.8), LoadPoint(60, 0.75, 4.0), LoadPoint(80, 0.2, 1.0)]
    result = max_goodput(points)
    assert result.load == pytest.approx(40 + 0.25 * 20)
    assert result.goodput_rps == pytest.approx(3.8 + 0.25 * 0.2)
    assert result.bounded and result.highest_passing == 40


def test_a_falling_goodput_past_the_crossing_keeps_the_passing_one():
    result = max_goodput([LoadPoint(20, 0.95, 2.0), LoadPoint(40, 0.5, 1.0)])
    assert result.goodput_rps == 2.0


def test_no_failing_step_gives_a_lower_bound():
    result = max_goodput([LoadPoint(20, 1.0, 2.0), LoadPoint(40, 0.99, 3.9)])
    assert result.goodput_rps == 3.9 and not result.bounded


def test_nothing_passing_gives_none():
    assert max_goodput([LoadPoint(20, 0.5, 1.0)]).goodput_rps is None
