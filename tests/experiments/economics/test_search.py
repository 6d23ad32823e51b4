"""The knee search against curves whose 90% crossing is known."""

from __future__ import annotations

import asyncio

import pytest

from services.experiments.economics.search import CASE_TOLERANCE, TOLERANCE, OverSeeds, bisect_knee, grid
from tests.experiments.economics.synthetic import AnalyticCurve
from tests.tolerance import assert_close


@pytest.mark.parametrize("first", [5.0, 60.0, 400.0])  # below, near and far above the knee
def test_bisection_lands_within_two_percent_of_the_known_crossing(first):
    curve = AnalyticCurve(knee=100.0, width=6.0)
    knee = asyncio.run(bisect_knee(curve, first))
    assert knee.converged and knee.method == "bisection"
    assert_close(knee.best.load, curve.crossing, rel=0.02, what="crossing load")
    assert_close(knee.goodput_rps, curve.goodput(curve.crossing), rel=0.02, what="max goodput")
    assert [p.load for p in knee.points] == curve.calls  # every point it ran is kept, in order
    assert len(knee.points) <= 16


def test_bisection_is_deterministic():
    first = asyncio.run(bisect_knee(AnalyticCurve(100.0, 6.0), 30.0))
    second = asyncio.run(bisect_knee(AnalyticCurve(100.0, 6.0), 30.0))
    assert [p.load for p in first.points] == [p.load for p in second.points]
    assert first.goodput_rps == second.goodput_rps


def test_integral_loads_stop_one_apart():
    curve = AnalyticCurve(knee=40.0, width=2.0)
    knee = asyncio.run(bisect_knee(curve, 8.0, integral=True))
    assert all(p.load == int(p.load) for p in knee.points)
    passing = max(p.load for p in knee.points if p.attainment >= 0.9)
    failing = min(p.load for p in knee.points if p.attainment < 0.9)
    assert failing - passing == 1 and passing <= curve.crossing < failing


def test_a_curve_that_never_passes_is_not_converged():
    knee = asyncio.run(bisect_knee(AnalyticCurve(knee=-50.0, width=1.0), 10.0))
    assert not knee.converged and knee.goodput_rps is None


def test_grid_uses_exactly_the_points_given_and_is_bounded_only_with_a_failure():
    curve = AnalyticCurve(100.0, 6.0)
    knee = asyncio.run(grid(curve, (20.0, 60.0, 80.0)))
    assert curve.calls == [20.0, 60.0, 80.0] and not knee.converged
    assert knee.at_knee().load == 80.0
    assert asyncio.run(grid(curve, (60.0, 120.0))).converged


def test_seeds_give_mean_and_spread():
    knees = tuple(asyncio.run(bisect_knee(AnalyticCurve(k, 6.0), 50.0)) for k in (90.0, 100.0, 110.0))
    over = OverSeeds(knees)
    assert_close(over.mean, sum(over.values) / 3, rel=1e-9)
    assert over.spread > 0 and OverSeeds(knees[:1]).spread == 0.0


def test_a_search_started_at_an_unmoved_knee_runs_its_two_points_only():
    base = asyncio.run(bisect_knee(AnalyticCurve(100.0, 6.0), 30.0))
    low, high = base.bracket()
    again = AnalyticCurve(100.0, 6.0)
    warm = asyncio.run(bisect_knee(again, low, factor=1.08, then=high))
    assert high is not None and again.calls == [low, high] and warm.converged
    assert warm.goodput_rps == base.goodput_rps


@pytest.mark.parametrize("moved", [0.7, 0.95, 1.05, 1.3])
def test_a_search_started_at_a_moved_knee_finds_it_and_a_near_one_in_fewer_points_than_a_cold_one(moved):
    # 8% steps from the old knee: a knee moved by 30% takes four of them, as many points as a cold search
    low, high = asyncio.run(bisect_knee(AnalyticCurve(100.0, 6.0), 32.0)).bracket()
    curve = AnalyticCurve(100.0 * moved, 6.0 * moved)
    warm = asyncio.run(bisect_knee(curve, low, factor=1.08, then=high))
    cold = asyncio.run(bisect_knee(AnalyticCurve(100.0 * moved, 6.0 * moved), 32.0))
    assert warm.converged
    assert_close(warm.best.load, curve.crossing, rel=0.02, what="crossing load")
    if abs(moved - 1) < 0.1:
        assert len(warm.points) < len(cold.points)


@pytest.mark.parametrize("moved", [0.5, 1.7])
def test_at_a_cases_tolerance_the_walk_strides_four_tolerances_and_finds_a_far_moved_knee_sooner(moved):
    low, high = asyncio.run(bisect_knee(AnalyticCurve(100.0, 2.0), 32.0, integral=True)).bracket()
    searches = {}
    for tolerance in (TOLERANCE, CASE_TOLERANCE):
        curve = AnalyticCurve(100.0 * moved, 2.0 * moved)
        searches[tolerance] = curve, asyncio.run(bisect_knee(curve, low, integral=True, factor=1.08, then=high,
                                                             tolerance=tolerance))
    curve, knee = searches[CASE_TOLERANCE]
    assert knee.converged
    assert_close(knee.best.load, curve.crossing, rel=CASE_TOLERANCE, what="crossing load")
    assert len(knee.points) < len(searches[TOLERANCE][1].points)
    walk = curve.calls[1:5] if moved > 1 else curve.calls[:4]  # up: after the base's failing load
    steps = [max(b / a, a / b) for a, b in zip(walk, walk[1:])]
    assert_close(steps[0], 1.08, rel=0.02, what="first step")
    assert all(abs(s - (1 + 4 * CASE_TOLERANCE)) < 0.02 for s in steps[1:])


def test_a_wider_tolerance_stops_the_bisection_sooner_at_that_width():
    fine = asyncio.run(bisect_knee(AnalyticCurve(300.0, 6.0), 32.0, integral=True))
    coarse = asyncio.run(bisect_knee(AnalyticCurve(300.0, 6.0), 32.0, integral=True, tolerance=CASE_TOLERANCE))
    low, high = coarse.bracket()
    assert coarse.converged and high - low <= CASE_TOLERANCE * low and high - low > TOLERANCE * low
    assert len(coarse.points) < len(fine.points)


def test_small_integral_steps_move_by_one_agent_at_least():
    curve = AnalyticCurve(knee=9.0, width=0.5)
    knee = asyncio.run(bisect_knee(curve, 3.0, integral=True, factor=1.08))
    assert knee.converged and len(set(curve.calls)) == len(curve.calls)
