"""The whole method on a synthetic backend whose knees are known: figures follow from them."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from services.experiments.economics.figures import bcr_gain_from, identity_gap
from services.experiments.economics.loadpoint import PointStats
from services.experiments.economics.method import Plan, run_method
from services.scenario import load_scenario
from services.scenario.cost import cost_per_hour
from tests.experiments.economics.synthetic import AnalyticCurve

KNEES = {"pd-intra": 40.0, "pd-cross": 30.0, "pdd": 50.0}


class SyntheticBackend:
    backend = "synthetic"

    def __init__(self) -> None:
        self.curves = {key: AnalyticCurve(knee, 3.0) for key, knee in KNEES.items()}

    async def run_point(self, scenario, workload, load, seed):
        key = scenario.name.removesuffix("-mini")
        point = await self.curves[key](load)
        return dataclasses.replace(point, seed=seed, stats=PointStats(
            rld_token_share=0.06 if key == "pdd" else None, pipelines={"P-MD": 97, "P-RLD": 3}))


class RecordingBackend(SyntheticBackend):
    """Keeps every point asked for, as (deployment, load)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, float]] = []

    async def run_point(self, scenario, workload, load, seed):
        self.asked.append((scenario.name.removesuffix("-mini"), load))
        return await super().run_point(scenario, workload, load, seed)


def test_figures_follow_from_the_knees_and_satisfy_the_bcr_identity():
    scenarios = {key: load_scenario(f"{key}-mini") for key in KNEES}
    backend = SyntheticBackend()
    outcome = asyncio.run(run_method(backend, scenarios, Plan("agentic", seeds=(0, 1), first_load=8.0),
                                     log=lambda line: None))
    f = outcome.figures
    crossing = {k: c.goodput(c.crossing) for k, c in backend.curves.items()}
    assert f["goodput_gain"] == pytest.approx(crossing["pdd"] / crossing["pd-intra"] - 1, rel=0.05)
    cost = {key: cost_per_hour(s) for key, s in scenarios.items()}
    assert f["cost_reduction"] == pytest.approx(1 - cost["pdd"] / cost["pd-intra"])
    assert identity_gap(f) == pytest.approx(0.0, abs=1e-12)
    assert f["bcr_gain"] == pytest.approx(bcr_gain_from(f["goodput_gain"], f["cost_reduction"]))
    assert f["rld_token_share"] == 0.06 and f["singular_share"] == pytest.approx(0.03)
    # TTFTs are compared at the baseline's knee load, where PDD (later knee) has the lower tail
    assert f["ttft_p99_reduction"] > 0
    summary = outcome.summary()
    assert summary["pdd"]["method"] == "bisection" and summary["pdd"]["bounded"]
    assert len(summary["pdd"]["max_goodput_rps"]["seeds"]) == 2


def test_ttfts_are_compared_at_the_baseline_knee_load_itself():
    scenarios = {key: load_scenario(f"{key}-mini") for key in KNEES}
    backend = RecordingBackend()
    asked = backend.asked
    outcome = asyncio.run(run_method(backend, scenarios, Plan("agentic", first_load=8.0), log=lambda line: None))
    reference = outcome.deployments["pd-intra"].reference.load
    assert reference == outcome.knees["pd-intra"].knees[0].at_knee().load
    for key, deployment in outcome.deployments.items():
        assert deployment.reference.load == reference, key  # not the nearest load its own search ran
        assert asked.count((key, reference)) == 1, key  # run once: by its search, or for the comparison
    searched = {p.load for p in outcome.knees["pd-cross"].knees[0].points}
    assert reference not in searched  # this case needs the extra point: the knees differ


def test_ttfts_at_the_reference_load_are_read_over_a_whole_window():
    scenarios = {key: load_scenario(f"{key}-mini") for key in KNEES}
    asked: list[tuple[str, float, bool]] = []

    class StoppingAtVerdicts(SyntheticBackend):
        """A failing point's window ends at its verdict, unless the whole window is asked for."""
        stops_at_verdict = True

        async def run_point(self, scenario, workload, load, seed, whole=False):
            asked.append((scenario.name.removesuffix("-mini"), load, whole))
            point = await super().run_point(scenario, workload, load, seed)
            return dataclasses.replace(point, stopped_at_verdict=not whole and point.attainment < 0.9)

    outcome = asyncio.run(run_method(StoppingAtVerdicts(), scenarios, Plan("agentic", first_load=8.0),
                                     log=lambda line: None))
    reference = outcome.deployments["pd-intra"].reference.load
    for key, deployment in outcome.deployments.items():
        assert deployment.reference.load == reference and not deployment.reference.stopped_at_verdict, key
    # pd-cross (knee 30) fails at the baseline's knee load: its search's point there, if any, ended
    # at its verdict, and the comparison runs it whole; the baseline's own point there passed
    assert ("pd-cross", reference, True) in asked and ("pd-intra", reference, True) not in asked
    assert all(load == reference for _, load, whole in asked if whole)  # the searches' points may stop


def test_a_deployment_run_only_at_the_reference_load_gives_the_ttft_figure_without_a_search():
    scenarios = {key: load_scenario(f"{key}-mini") for key in KNEES}
    backend = RecordingBackend()
    asked = backend.asked
    plan = Plan("agentic", first_load=8.0, reference_only=frozenset({"pd-cross"}))
    outcome = asyncio.run(run_method(backend, scenarios, plan, log=lambda line: None))
    reference = outcome.deployments["pd-intra"].reference.load
    assert [load for key, load in asked if key == "pd-cross"] == [reference]  # one point, no search
    cross = outcome.deployments["pd-cross"]
    assert cross.reference.load == reference and cross.knee is None and cross.goodput_rps is None
    assert "pd-cross" not in outcome.knees and "pd-cross" not in outcome.checks
    assert "pd-cross" not in outcome.summary()
    p99 = {key: outcome.deployments[key].reference.ttft_s.p99 for key in ("pdd", "pd-cross")}
    assert outcome.figures["ttft_p99_reduction"] == pytest.approx(1 - p99["pdd"] / p99["pd-cross"])
    assert outcome.figures["ttft_p99_reduction"] > 0  # pd-cross (knee 30) is past its knee there
