"""The report-scale run's wiring (arms, sensitivity, tornado, charts) on a synthetic backend standing in for the
simulator: knees depend on what the scenario and workload say, so every case moves the figure it should."""

from __future__ import annotations

import asyncio
import dataclasses

from services.experiments.economics import experiment
from services.experiments.economics.sensitivity import PARAMETERS
from services.profiles import load_model
from services.types import Mode, Role
from tests.experiments.economics.synthetic import AnalyticCurve

BASE_KNEE = {Mode.PD_INTRA: 40.0, Mode.PD_CROSS: 30.0, Mode.PDD: 50.0}


class ScenarioDrivenBackend:
    backend = "synthetic"

    async def run_point(self, scenario, workload, load, seed):
        knee = BASE_KNEE[scenario.mode]
        if scenario.mode is not Mode.PD_INTRA:
            knee *= (4392 / load_model(scenario.model).kv_bytes_per_token) ** 0.25  # more KV: the line fills sooner
        relays = scenario.pools_with(Role.RELAY_DECODE)
        knee += 5.0 * (relays[0].count - 1) if relays else 0.0
        knee *= scenario.pools_with(Role.PREFILL)[0].count / 2  # prefill-bound, as the report-scale knees are
        if "output=768" in workload:
            knee *= 0.8
        point = await AnalyticCurve(knee, 2.0)(load)
        return dataclasses.replace(point, seed=seed)


def test_full_run_runs_every_arm_and_parameter_and_draws_the_tornado(tmp_path, monkeypatch):
    monkeypatch.setattr(experiment, "point_runner", lambda *_: ScenarioDrivenBackend())
    result = asyncio.run(experiment.economics_experiment(False, tmp_path, log=lambda line: None))
    assert set(result.data["arms"]) == {"baseline", "pdd-b-tp8", "pdd-b-tp16-dp", "pd-cross-b"}
    bars = result.data["tornado"]
    assert {b["parameter"] for b in bars} == {p.name for p in PARAMETERS}
    base = result.headline["bcr_gain"]
    swings = [max(abs(b["low"] - base), abs(b["high"] - base) if b["high"] is not None else 0.0) for b in bars]
    assert swings == sorted(swings, reverse=True)
    by_name = {b["parameter"]: b for b in bars}
    assert by_name["KV bytes per token"]["low"] < base  # PDD's knee falls with 46 KB per token
    premium = by_name["GPU-B price premium"]
    assert premium["low"] > base > premium["high"]  # cheaper B, better PDD BCR
    assert by_name["host-tier size"]["low"] == base  # this backend ignores the host tier
    assert {p.name for p in result.images} >= {"goodput.png", "arms_bcr.png", "tornado.png"}


def test_the_prefill_tier_case_starts_its_searches_at_twice_the_base_knee(tmp_path, monkeypatch):
    asked: dict[tuple[str, int], list[float]] = {}

    class Recording(ScenarioDrivenBackend):
        async def run_point(self, scenario, workload, load, seed):
            key = (scenario.name, scenario.pools_with(Role.PREFILL)[0].count)
            asked.setdefault(key, []).append(load)
            return await super().run_point(scenario, workload, load, seed)

    monkeypatch.setattr(experiment, "point_runner", lambda *_: Recording())
    result = asyncio.run(experiment.economics_experiment(False, tmp_path, log=lambda line: None))
    for preset in experiment.TORNADO_DEPLOYMENTS:
        name = experiment.DEPLOYMENTS[preset]
        base_knee = result.data["deployments"][preset]["points"]
        passing = max(p["load"] for p in base_knee if p["attainment"] >= 0.9)
        doubled = asked[(name, 4)]
        assert doubled[0] == round(2 * passing), (preset, doubled, passing)
        assert len(doubled) <= 6, doubled  # started near its knee, it steps 8% and halves twice
    bar = next(b for b in result.data["tornado"] if b["parameter"] == "prefill tier")
    # both knees double on this backend, and the same added prefill cost dilutes PDD's lower cost
    assert bar["low"] < result.headline["bcr_gain"]
    record = next(r for r in result.data["cases"] if r["parameter"] == "prefill tier")
    base = result.data["deployments"]
    for preset in experiment.TORNADO_DEPLOYMENTS:  # each case's record keeps its own knees
        assert record["max_goodput_rps"][preset] > 1.8 * base[preset]["max_goodput_rps"]["mean"]
    assert record["figures"]["bcr_gain"] == bar["low"]
    assert any(line.startswith("| prefill tier | 4 instances |") for line in result.notes)


def test_pdds_prefill_tier_case_moves_pdds_search_alone(tmp_path, monkeypatch):
    asked: dict[tuple[str, int], list[float]] = {}

    class Recording(ScenarioDrivenBackend):
        async def run_point(self, scenario, workload, load, seed):
            asked.setdefault((scenario.name, scenario.pools_with(Role.PREFILL)[0].count), []).append(load)
            return await super().run_point(scenario, workload, load, seed)

    monkeypatch.setattr(experiment, "point_runner", lambda *_: Recording())
    result = asyncio.run(experiment.economics_experiment(False, tmp_path, log=lambda line: None))
    base = result.data["deployments"]
    passing = max(p["load"] for p in base["pdd"]["points"] if p["attainment"] >= 0.9)
    third = asked[(experiment.DEPLOYMENTS["pdd"], 3)]
    assert third[0] == round(1.5 * passing), (third, passing)
    # The baseline is left as it was: its case search is its base search's bracket, not a new climb.
    baseline_loads = {p["load"] for p in base["pd-intra"]["points"]}
    assert set(asked[(experiment.DEPLOYMENTS["pd-intra"], 2)]) == baseline_loads
    record = next(r for r in result.data["cases"] if r["parameter"] == "PDD's prefill tier")
    assert record["max_goodput_rps"]["pd-intra"] == base["pd-intra"]["max_goodput_rps"]["mean"]
    assert record["max_goodput_rps"]["pdd"] > 1.4 * base["pdd"]["max_goodput_rps"]["mean"]
    # a third of the prefill-bound knee again, for a sixth more of PDD's bill: the gain rises
    bar = next(b for b in result.data["tornado"] if b["parameter"] == "PDD's prefill tier")
    assert bar["low"] > result.headline["bcr_gain"] and bar["low"] == record["figures"]["bcr_gain"]


def test_the_line_cases_compare_ttfts_with_cross_dc_pd_run_at_their_reference_load_alone(tmp_path, monkeypatch):
    asked: dict[tuple[str, int], list[float]] = {}

    class Recording(ScenarioDrivenBackend):
        async def run_point(self, scenario, workload, load, seed):
            kv = load_model(scenario.model).kv_bytes_per_token
            asked.setdefault((scenario.name, kv), []).append(load)
            return await super().run_point(scenario, workload, load, seed)

    monkeypatch.setattr(experiment, "point_runner", lambda *_: Recording())
    result = asyncio.run(experiment.economics_experiment(False, tmp_path, log=lambda line: None))
    records = {(r["parameter"], r["case"]): r for r in result.data["cases"]}
    kv = records[("KV bytes per token", "46 KB")]
    cross_at_46k = [loads for (name, bytes_), loads in asked.items()
                    if name == experiment.DEPLOYMENTS["pd-cross"] and bytes_ > 4392]
    # cross-DC PD at 46 KB runs once, at the case's own baseline knee: no search of its own
    assert cross_at_46k == [[kv["reference_agents"]]]
    assert kv["knee_agents"]["pd-intra"] == kv["reference_agents"]
    assert set(kv["ttft_p99_s"]) == {"pd-intra", "pd-cross", "pdd"}
    assert kv["figures"]["ttft_p99_reduction"] == 1 - kv["ttft_p99_s"]["pdd"] / kv["ttft_p99_s"]["pd-cross"]
    for side in ("-50%", "+50%"):
        assert records[("pipeline threshold", side)]["figures"]["ttft_p99_reduction"] is not None
    # every other case leaves the TTFT figure to the base run
    assert records[("host-tier size", "25%")]["figures"]["ttft_p99_reduction"] is None
    assert records[("host-tier size", "25%")]["ttft_p99_s"] == {}
    row = next(line for line in result.notes if line.startswith("| KV bytes per token | 46 KB |"))
    assert row.rstrip(" |").endswith(f"{kv['figures']['ttft_p99_reduction']:+.1%}")


def test_deployments_only_searches_the_three_deployments_and_no_arm_or_case(tmp_path, monkeypatch):
    asked = []

    class Recording(ScenarioDrivenBackend):
        async def run_point(self, scenario, workload, load, seed):
            asked.append(scenario.name)
            return await super().run_point(scenario, workload, load, seed)

    monkeypatch.setattr(experiment, "point_runner", lambda *_: Recording())
    (tmp_path / "full").mkdir()
    (tmp_path / "only").mkdir()
    full = asyncio.run(experiment.economics_experiment(False, tmp_path / "full", log=lambda line: None))
    alone = len(asked)
    asked.clear()
    result = asyncio.run(experiment.economics_experiment(False, tmp_path / "only", log=lambda line: None,
                                                         deployments_only=True))
    assert set(asked) == set(experiment.DEPLOYMENTS.values()) and len(asked) < alone / 2, (len(asked), alone)
    assert result.headline == full.headline  # the same searches give the same figures
    assert "arms" not in result.data and "tornado" not in result.data


def test_a_trace_searches_replay_speeds_and_keeps_its_own_shape(tmp_path, monkeypatch):
    asked = []

    class Recording(ScenarioDrivenBackend):
        async def run_point(self, scenario, workload, load, seed):
            asked.append((workload, load))
            return await super().run_point(scenario, workload, load, seed)

    monkeypatch.setattr(experiment, "point_runner", lambda *_: Recording())
    trace = "mooncake:loadgen/samples/mooncake-sample.jsonl"
    result = asyncio.run(experiment.economics_experiment(False, tmp_path, log=lambda line: None, workload=trace))
    assert {workload for workload, _ in asked} == {trace}  # no case edits the trace's own shape
    assert any(load != round(load) for _, load in asked)  # speeds are halved past whole numbers
    shaped = {p.name for p in PARAMETERS if p.low.workload_option is not None}
    assert shaped == {"hit mix (0-90% bin)", "output length"}
    assert {b["parameter"] for b in result.data["tornado"]} == {p.name for p in PARAMETERS} - shaped


def test_the_warm_up_option_reaches_every_simulated_point_and_its_stored_key(tmp_path):
    from services.experiments.economics.experiment import point_runner

    assert point_runner("simulate", False, tmp_path).runner.settings()["warmup_s"] == 120.0
    assert point_runner("simulate", False, tmp_path, warmup_s=360.0).runner.settings()["warmup_s"] == 360.0
    assert point_runner("simulate", True, tmp_path, warmup_s=45.0).runner.warmup_s == 45.0
