"""What must hold of the planner whatever the numbers, checked on the screen (the simulated stage: test_planner.py).

- a larger budget never lowers the best goodput;
- scaling every price and the budget by one factor leaves the chosen deployments unchanged;
- a pricier WAN line never raises PDD's best BCR relative to the architectures without a line. (Against
  cross-datacenter PD it may: both pay for the line, and it is a larger share of the cheaper one's bill.)
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.plan.planner import screen_all
from services.plan.spec import SPECS, load_spec
from services.plan.workload import sample_workload

MINI = str(SPECS / "mini.yaml")
FEW = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _spec(*overrides: str):
    return load_spec(MINI, ["search.max_instances=3", *overrides])


def _best_goodput(spec) -> float:
    screened = screen_all(spec, sample_workload(spec.workload))
    return max((rows[0].goodput_rps for rows in screened.values() if rows), default=0.0)


def _best_bcr(rows) -> float:
    return max((s.bcr for s in rows), default=0.0)


@FEW
@given(st.floats(6.0, 30.0), st.floats(0.0, 15.0))
def test_a_larger_budget_never_lowers_the_best_goodput(budget, more):
    smaller = _best_goodput(_spec(f"budget_per_hour={budget}"))
    larger = _best_goodput(_spec(f"budget_per_hour={budget + more}"))
    assert larger >= smaller


@FEW
@given(st.floats(0.05, 20.0))
def test_scaling_every_price_and_the_budget_leaves_the_choices_unchanged(factor):
    spec = _spec("budget_per_hour=24")
    sample = sample_workload(spec.workload)
    base, scaled = screen_all(spec, sample), screen_all(spec.scaled_prices(factor), sample)
    for arch in spec.architectures:
        assert [s.candidate.key() for s in base[arch][:3]] == [s.candidate.key() for s in scaled[arch][:3]]
        assert [s.goodput_rps for s in base[arch][:3]] == [s.goodput_rps for s in scaled[arch][:3]]


@pytest.mark.parametrize("budget", [16.0, 30.0])
def test_a_pricier_line_never_raises_pdds_bcr_relative_to_the_intra_datacenter_ones(budget):
    ratios = []
    for factor in (0.5, 1.0, 2.0, 4.0):
        prices = [f"wan=[{{rate: 10gbit, price_per_hour: {1.125 * factor}}}, "
                  f"{{rate: 20gbit, price_per_hour: {2.25 * factor}}}]"]
        spec = _spec(f"budget_per_hour={budget}", *prices)
        screened = screen_all(spec, sample_workload(spec.workload))
        others = max(_best_bcr(screened["colocated"]), _best_bcr(screened["pd-intra"]))
        ratios.append(_best_bcr(screened["pdd"]) / others)
    assert ratios[0] > 0, "the spec must leave PDD a candidate"
    assert all(later <= earlier for earlier, later in zip(ratios, ratios[1:])), ratios


@pytest.mark.parametrize("target, more", [(5.0, 5.0), (10.0, 15.0)])
def test_a_higher_goodput_target_never_costs_less(target, more):
    def least_cost(rps: float) -> dict[str, float]:
        spec = _spec("budget_per_hour=null", f"target_rps={rps}")
        screened = screen_all(spec, sample_workload(spec.workload))
        for rows in screened.values():
            assert all(s.goodput_rps >= rps for s in rows)
            assert [s.cost_per_hour for s in rows] == sorted(s.cost_per_hour for s in rows)
        return {arch: rows[0].cost_per_hour for arch, rows in screened.items() if rows}

    lower, higher = least_cost(target), least_cost(target + more)
    assert lower and all(higher[arch] >= lower[arch] for arch in higher)
