"""The fault campaign: 200 seeded schedules with every request checked, and a checker that cannot pass vacuously."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter

import pytest

from services.chaos.faults import POLL_S, KillRestart, WanJitter, WanPartition
from services.chaos.outcomes import FaultFreeText
from services.profiles import load_model
from services.chaos.scenarios import DEADLINES
from services.scenario.loader import load_scenario
from services.simulate.campaign import (Campaign, at_rest, check, run_campaign, run_one, simulate_schedule,
                                        still_working)
from services.simulate.clock import run_virtual
from services.simulate.run import SimulatedRun
from services.types import Role

WORKLOAD = "agentic:context=4K,output=16..64,think=200ms,turns=3"
SCHEDULES = 200


def _campaign(preset: str = "pdd-mini", runs: int = SCHEDULES, seed: int = 0) -> Campaign:
    return Campaign(load_scenario(preset, list(DEADLINES)), WORKLOAD, duration_s=3.0, seed=seed, runs=runs, rate=2.0)


@pytest.mark.slow
def test_200_fault_schedules_keep_every_invariant():
    reports = run_campaign(_campaign())
    assert [r.seed for r in reports] == list(range(SCHEDULES))
    assert [(r.seed, r.problems) for r in reports if r.problems] == []
    # The faults bit: every kind ran, every pool was killed, and requests failed (with their error) under them.
    faults = Counter(type(t.fault) for r in reports for t in r.schedule)
    assert set(faults) == {WanPartition, WanJitter, KillRestart}
    assert {t.fault.role for r in reports for t in r.schedule if isinstance(t.fault, KillRestart)} == {
        Role.PREFILL, Role.RELAY_DECODE, Role.MAIN_DECODE}
    sent, completed, failed = (sum(getattr(r, k) for r in reports) for k in ("sent", "completed", "failed"))
    assert sent > 5 * SCHEDULES and failed > 0 and completed + failed == sent


@pytest.mark.parametrize("preset", ["pd-cross-mini", "pdd-kvship-mini", "colocated-mini"])
def test_other_mode_families_keep_the_invariants(preset):
    reports = run_campaign(_campaign(preset, runs=15, seed=500))
    assert [(r.seed, r.problems) for r in reports if r.problems] == []
    assert sum(r.sent for r in reports) > 0


def _corrupting(victim_seed: int):
    """simulate_schedule, then one completed answer of run `victim_seed` has a token changed."""

    def simulate(campaign: Campaign, seed: int, schedule) -> SimulatedRun:
        run = simulate_schedule(campaign, seed, schedule)
        if seed == victim_seed:
            rid = next(r.id for r in run.records if r.ok)
            run.outputs[rid] = [run.outputs[rid][0] + 1, *run.outputs[rid][1:]]
        return run
    return simulate


def test_a_corrupted_answer_is_reported_with_the_seed_that_replays_it():
    reports = run_campaign(_campaign(runs=4, seed=40), simulate=_corrupting(42))
    broken = [r for r in reports if r.problems]
    assert [r.seed for r in broken] == [42]
    problem = broken[0].problems[0]
    assert "completed with" in problem and "0 of them the fault-free text's first" in problem
    replayed = run_one(_campaign(runs=1, seed=42), 42)  # the same seed alone: the same schedule, no planted fault
    assert replayed.schedule == broken[0].schedule and not replayed.problems


def test_the_checker_finds_lost_duplicated_and_truncated_requests():
    campaign = _campaign(runs=1, seed=3)
    run = simulate_schedule(campaign, 3, [])
    expected = FaultFreeText(campaign.scenario.seed, load_model(campaign.scenario.model).vocab_size)
    assert check(run, expected) == []
    first, second, third = run.records[:3]
    records = [dataclasses.replace(first, status="timeout", error="no complete answer within 105s"),
               second, second, dataclasses.replace(third, status="error", error="")] + run.records[3:]
    outputs = {**run.outputs, third.id: run.outputs[third.id][:2]}  # streamed the start of its text, then failed
    problems = check(dataclasses.replace(run, records=records, outputs=outputs), expected)
    assert problems == [f"{second.id}: 2 outcomes, not one",
                        f"{first.id}: lost (timeout: no complete answer within 105s)",
                        f"{third.id}: failed without an error message"]
    # A request that has no outcome at all is caught as well.
    assert check(dataclasses.replace(run, records=run.records[1:]), expected) == [f"{first.id}: 0 outcomes, not one"]
    # Tokens streamed before an error must be the start of the fault-free text too.
    wrong = {**outputs, third.id: [outputs[third.id][0] + 1]}
    failed = [*run.records[:2], dataclasses.replace(third, status="error", error="http_502: broke"), *run.records[3:]]
    assert check(dataclasses.replace(run, records=failed, outputs=wrong), expected) == [
        f"{third.id}: failed after tokens that differ from the fault-free text at 0"]


def test_work_left_in_progress_at_the_end_is_reported():
    run = simulate_schedule(_campaign(runs=1, seed=3), 3, [])
    at_s, services = run.snapshots[-1]
    assert still_working(run) == []
    busy = {**services, "router": {**services["router"], "inflight": 1},
            "main-decode": {**services["main-decode"], "transfers_pending": 1,
                            "instances": {"main-decode-0": {"running": 2, "waiting": 0}}}}
    problems = still_working(dataclasses.replace(run, snapshots=[*run.snapshots[:-1], (at_s, busy)]))
    assert problems == [f"not at rest at the end ({at_s:g} s): router: 1 requests in flight",
                        f"not at rest at the end ({at_s:g} s): main-decode-0: 2 sequences running, 0 waiting",
                        f"not at rest at the end ({at_s:g} s): main-decode: 1 KV transfers open and not landed"]


class _Draining:
    """A mesh whose router finishes its last request after `polls` looks at its stats (or never)."""

    def __init__(self, polls: float) -> None:
        self.polls = polls

    def stats(self) -> dict:
        self.polls -= 1
        return {"router": {"inflight": 1 if self.polls > 0 else 0}}


def test_the_rest_wait_ends_when_the_work_does_or_at_its_deadline():
    async def waited(mesh) -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await at_rest(mesh, deadline_s=30.0)
        return loop.time() - start

    assert run_virtual(waited(_Draining(3))) == pytest.approx(2 * POLL_S)
    assert run_virtual(waited(_Draining(float("inf")))) == pytest.approx(30.0, abs=POLL_S)
