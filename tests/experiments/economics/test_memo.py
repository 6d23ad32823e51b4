"""Each simulated point runs once: asked again, or at other prices, it is the point already run."""

from __future__ import annotations

import asyncio

from services.experiments.economics import experiment
from services.experiments.economics import memo as memo_module
from services.experiments.economics.memo import PointMemo, point_key
from services.scenario import load_scenario
from services.scenario.cost import cost_per_hour
from tests.experiments.economics.test_full_run import ScenarioDrivenBackend

WORKLOAD = "agentic:context=64K"


class CountingBackend(ScenarioDrivenBackend):
    """The synthetic backend, keeping every scenario and point it was asked to run."""

    def __init__(self) -> None:
        self.asked: list[tuple] = []

    async def run_point(self, scenario, workload, load, seed):
        self.asked.append((scenario, workload, load, seed))
        return await super().run_point(scenario, workload, load, seed)


def test_a_point_asked_again_or_at_other_prices_is_not_run_again():
    inner = CountingBackend()
    memo = PointMemo(inner)
    base = load_scenario("paper-full-pdd")
    b_pool = next(p.name for p in base.pools if p.gpu != base.pools[0].gpu)
    repriced = load_scenario("paper-full-pdd", ("wan_price_per_hour=9.0", f"pools.{b_pool}.price_per_hour=3.5"))
    assert cost_per_hour(repriced) != cost_per_hour(base)

    async def ask():
        first = await memo.run_point(base, WORKLOAD, 40, 0)
        assert await memo.run_point(base, WORKLOAD, 40, 0) is first
        assert await memo.run_point(repriced, WORKLOAD, 40, 0) is first
        await memo.run_point(load_scenario("paper-full-pdd", ("pdd.transfer_threshold_s=0.25",)), WORKLOAD, 40, 0)
        await memo.run_point(base, WORKLOAD, 41, 0)
        await memo.run_point(base, WORKLOAD, 40, 1)
        await memo.run_point(base, "agentic:context=64K,output=16..240", 40, 0)

    asyncio.run(ask())
    assert (memo.run, memo.reused) == (5, 2) == (len(inner.asked), 2)


def test_the_full_run_runs_each_point_once_and_none_for_a_price(tmp_path, monkeypatch):
    inner = CountingBackend()
    monkeypatch.setattr(experiment, "point_runner", lambda *_: PointMemo(inner))
    result = asyncio.run(experiment.economics_experiment(False, tmp_path, log=lambda line: None))
    keys = [point_key(*asked) for asked in inner.asked]
    assert len(keys) == len(set(keys))
    assert result.data["points"] == {"run": len(keys), "reused": result.data["points"]["reused"], "loaded": 0}
    # No scenario simulated has a price of its own: the price cases only re-read the points already run.
    assert all(p.price_per_hour is None for s, *_ in inner.asked for p in s.pools)
    assert all(s.wan_price_per_hour == load_scenario(s.name).wan_price_per_hour for s, *_ in inner.asked)
    # The searches run: 3 deployments, the TP8 arm (the other arms are the deployments unchanged); the cases
    # on the baseline and PDD only: KV bytes and the prefill tier; host tier, hit mix and output length, two
    # cases each; relay size, threshold and PDD's own prefill tier on PDD; the connection window's two cases
    # on PDD (they leave the baseline without a line as it was); and cross-DC PD at 46 KB and under each
    # window for those cases' TTFT figures (the threshold cases leave cross-DC PD as it was).
    searched = {point_key(s, w, 0, 0) for s, w, _, _ in inner.asked}
    assert len(searched) == 3 + 1 + 2 + 2 + 2 * 3 * 2 + 1 + 2 + 1 + 2 + 1 + 2
    assert result.data["points"]["reused"] > 0
    premium = {b["parameter"]: b for b in result.data["tornado"]}["GPU-B price premium"]
    assert premium["low"] > result.headline["bcr_gain"] > premium["high"]  # the reused points, at the new prices


class ParallelBackend(CountingBackend):
    parallel = True

    def __init__(self) -> None:
        super().__init__()
        self.running = self.most_at_once = 0

    async def run_point(self, scenario, workload, load, seed):
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            await asyncio.sleep(0)  # another search's point may start meanwhile
            return await super().run_point(scenario, workload, load, seed)
        finally:
            self.running -= 1


def test_a_parallel_runner_runs_the_searches_at_once_to_the_same_figures(tmp_path, monkeypatch):
    sequential, parallel = CountingBackend(), ParallelBackend()
    results = []
    for backend in (sequential, parallel):
        monkeypatch.setattr(experiment, "point_runner", lambda *_, backend=backend: PointMemo(backend))
        results.append(asyncio.run(experiment.economics_experiment(False, tmp_path, log=lambda line: None)))
    one, many = results
    assert many.headline == one.headline
    assert many.data["arms"] == one.data["arms"] and many.data["tornado"] == one.data["tornado"]
    assert many.data["points"] == one.data["points"]
    assert parallel.most_at_once > 1


class SettledBackend(CountingBackend):
    """A backend whose points depend on a setting, as SimulatedPoints' on its warm-up and window."""

    def __init__(self, warmup_s: float) -> None:
        super().__init__()
        self.warmup_s = warmup_s

    def settings(self) -> dict:
        return {"warmup_s": self.warmup_s}


def test_a_resumed_run_reads_the_points_a_run_of_the_same_settings_stored(tmp_path, monkeypatch):
    scenario = load_scenario("paper-full-pdd")

    async def ask(memo, loads=(30, 40)):
        return [await memo.run_point(scenario, WORKLOAD, load, 0) for load in loads]

    first = PointMemo(SettledBackend(120.0), store=tmp_path)
    stored = asyncio.run(ask(first))
    assert len(list(tmp_path.glob("*.json"))) == 2
    again = SettledBackend(120.0)
    resumed = PointMemo(again, store=tmp_path, resume=True)
    assert resumed.loaded == 2
    assert asyncio.run(ask(resumed, (30, 40, 50)))[:2] == stored
    assert [load for _, _, load, _ in again.asked] == [50]  # only the point no run had stored
    other = SettledBackend(60.0)
    asyncio.run(ask(PointMemo(other, store=tmp_path, resume=True)))
    assert len(other.asked) == 2  # points stored under other settings are not these
    fresh = SettledBackend(120.0)
    asyncio.run(ask(PointMemo(fresh, store=tmp_path)))
    assert len(fresh.asked) == 2  # without resume nothing is read
    monkeypatch.setattr(memo_module, "code_fingerprint", lambda: "other code")
    changed = SettledBackend(120.0)
    asyncio.run(ask(PointMemo(changed, store=tmp_path, resume=True)))
    assert len(changed.asked) == 2  # points stored by other code are stale
