"""A seeded fault campaign: many short simulations, each under its own random fault schedule, each checked.

Run k of a campaign with seed S uses seed S + k for everything: the workload,
its arrivals and the fault schedule (services/simulate/faults.py
`draw_schedule`), so `--faults 1 --seed S+k` replays run k alone. Every run
is held to the invariants of the chaos runs (services/chaos/outcomes.py):

- every request sent has exactly one outcome: completed, or failed with an
  error message; a client deadline reached (the router's own deadline is
  shorter, so it means a hang), an error without a message or an
  interrupted request is lost;
- every completed text is the fault-free text, and the tokens a failed
  request streamed before its error are the start of it. A request's output
  is a pure function of its prompt, position and seed, so the fault-free
  text is known without a fault-free run (`FaultFreeText`);
- and, as the chaos runs check the mesh at rest afterwards, nothing is left
  working within REST_WAIT_S of every request having its outcome and the
  faults having ended.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from tqdm import tqdm

from services.chaos.outcomes import FaultFreeText
from services.chaos.faults import POLL_S
from services.chaos.resources import WORK_KEYS
from services.chaos.runner import CLIENT_MARGIN_S, REST_WAIT_S
from services.profiles import load_model
from services.scenario import Scenario
from services.simulate.faults import Timed, draw_schedule, play
from services.simulate.outage import OutageMesh
from services.simulate.run import BenchError, SimulatedRun, run_simulation
from services.simulate.wiring import SimulatedMesh, simulated_plan


@dataclass(frozen=True)
class Campaign:
    scenario: Scenario
    workload: str
    duration_s: float
    seed: int
    runs: int
    rate: float | None = None
    concurrency: int | None = None

    def client_timeout_s(self) -> float:
        return self.scenario.request_timeout_s + CLIENT_MARGIN_S


@dataclass
class RunReport:
    seed: int
    schedule: list[Timed]
    sent: int = 0
    completed: int = 0
    failed: int = 0
    problems: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"seed": self.seed, "schedule": [timed.describe() for timed in self.schedule], "sent": self.sent,
                "completed": self.completed, "failed": self.failed, "problems": self.problems}


def check(run: SimulatedRun, expected: FaultFreeText) -> list[str]:
    """Every broken invariant of one run, one line each; empty when the run kept them all."""
    problems = []
    outcomes = Counter(record.id for record in run.records)
    for request_id in run.plans:
        if outcomes[request_id] != 1:
            problems.append(f"{request_id}: {outcomes[request_id]} outcomes, not one")
    for record in run.records:
        plan = run.plans.get(record.id)
        if plan is None:
            problems.append(f"{record.id}: an outcome of a request never sent")
            continue
        want, got = expected.ids(plan.prompt, plan.max_tokens), run.outputs.get(record.id, [])
        if record.status == "ok" and got != want:
            problems.append(f"{record.id}: completed with {len(got)} tokens, {_matching(got, want)} of them "
                            f"the fault-free text's first, which has {len(want)}")
        elif record.status == "error" and got != want[:len(got)]:
            problems.append(f"{record.id}: failed after tokens that differ from the fault-free text at "
                            f"{_matching(got, want)}")
        elif record.status == "error" and not record.error:
            problems.append(f"{record.id}: failed without an error message")
        elif record.status in ("timeout", "cancelled"):
            problems.append(f"{record.id}: lost ({record.status}: {record.error})")
    return problems + still_working(run)


def still_working(run: SimulatedRun) -> list[str]:
    """Work left in progress in the last snapshot, taken once the mesh was at rest or REST_WAIT_S had passed."""
    if not run.snapshots:
        return []
    at_s, services = run.snapshots[-1]
    return [f"not at rest at the end ({at_s:g} s): {item}" for item in busy(services)]


_WORK = {"transfers_pending": "KV transfers open and not landed", "relayed": "requests the relay still holds",
         "transfers_in_flight": "KV transfers in flight"}


def busy(services: dict[str, dict]) -> list[str]:
    """What the services' stats show at work: a request the router still counts, a sequence an engine
    holds, a transfer still sending or still awaited, a request a relay still holds."""
    found = [f"router: {services['router']['inflight']} requests in flight"] if services["router"]["inflight"] else []
    for name, stats in services.items():
        for instance, engine in stats.get("instances", {}).items():
            if engine["running"] or engine["waiting"]:
                found.append(f"{instance}: {engine['running']} sequences running, {engine['waiting']} waiting")
        for key in WORK_KEYS:  # what the chaos runs' leak check reads
            if stats.get(key):
                found.append(f"{name}: {stats[key]} {_WORK[key]}")
    return found


async def at_rest(mesh: SimulatedMesh, deadline_s: float = REST_WAIT_S) -> None:
    """Until nothing is at work (a transfer of a request the relay finished may still be landing), at most
    `deadline_s`: what the chaos runs wait for the mesh at rest (services/chaos/resources.py)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + deadline_s
    while busy(mesh.stats()) and loop.time() < deadline:
        await asyncio.sleep(POLL_S)


def _matching(got: list[int], want: list[int]) -> int:
    return next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))


def simulate_schedule(campaign: Campaign, seed: int, schedule: list[Timed]) -> SimulatedRun:
    """One run of the campaign's traffic from `seed` under `schedule`, on virtual time."""
    return run_simulation(campaign.scenario, campaign.workload, rate=campaign.rate, concurrency=campaign.concurrency,
                          duration_s=campaign.duration_s, seed=seed, request_timeout_s=campaign.client_timeout_s(),
                          mesh_type=OutageMesh, during=lambda mesh: play(mesh, schedule), after=at_rest,
                          keep_plans=True)


def run_one(campaign: Campaign, seed: int, simulate: Callable[..., SimulatedRun] | None = None) -> RunReport:
    """Draw the schedule of `seed`, run it and check it; a run that raises is reported, not raised."""
    schedule = draw_schedule(random.Random(seed), simulated_plan(campaign.scenario), campaign.duration_s)
    report = RunReport(seed, schedule)
    expected = FaultFreeText(campaign.scenario.seed, load_model(campaign.scenario.model).vocab_size)
    try:
        run = (simulate or simulate_schedule)(campaign, seed, schedule)
    except BenchError:
        raise  # bad input (a pacing the workload cannot take): not a finding of the campaign
    except Exception as exc:  # noqa: BLE001 - the campaign reports it with the seed that raised it
        report.problems.append(f"the run raised {type(exc).__name__}: {exc}")
        return report
    report.sent = len(run.plans)
    report.completed = sum(record.ok for record in run.records)
    report.failed = sum(record.status == "error" for record in run.records)
    report.problems = check(run, expected)
    return report


def run_campaign(campaign: Campaign, progress: bool = False,
                 simulate: Callable[..., SimulatedRun] | None = None) -> list[RunReport]:
    """Runs seed, seed + 1, ... one after another (process_clocks is process-wide); a bar over schedules."""
    reports = []
    with tqdm(total=campaign.runs, unit="schedule", desc="fault campaign", disable=not progress,
              file=sys.stderr, dynamic_ncols=True) as bar:
        for seed in range(campaign.seed, campaign.seed + campaign.runs):
            reports.append(run_one(campaign, seed, simulate))
            bar.set_postfix(violations=sum(bool(r.problems) for r in reports), refresh=False)
            bar.update()
    return reports
