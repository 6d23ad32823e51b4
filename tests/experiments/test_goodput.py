"""Max goodput from a sweep: the 90% crossing between the last passing and the first failing rate."""

from __future__ import annotations

import pytest

from services.experiments.goodput import max_goodput


def test_the_crossing_is_interpolated():
    result = max_goodput({2: 1.0, 4: 0.95, 6: 0.75, 8: 0.2})
    assert result.rate == pytest.approx(4 + 0.05 / 0.20 * 2)
    assert result.bounded and result.highest_passing == 4


def test_no_failing_rate_gives_a_lower_bound():
    result = max_goodput({2: 1.0, 4: 0.99})
    assert result.rate == 4 and not result.bounded


def test_nothing_passing_gives_none():
    assert max_goodput({2: 0.5}).rate is None
