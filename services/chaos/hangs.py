"""Hangs: SIGSTOP of a role's process or of a link's, held until its keeper notices (docs/hangs.md).

A stopped process keeps its sockets open and answers nothing, so nothing fails at once: the
router's call deadlines (services/router/deadlines.py) send new requests down the paths a crash
gives them, and the keeper's liveness check (services/launcher/keeper.py) kills the process within
its bound, after which the keeper restarts it as after any crash. The fault is over when the
restarted process answers /health; should the keeper not act within RESTART_WAIT_S, the process
is continued (SIGCONT) and the run fails, naming the hang that was never noticed. A probe request
(a fresh short prompt) measures its TTFT before the hang and every second during it: once the hang
is past the keeper's bound, the mesh must answer it within a second of that baseline: serve it, or
(pd-cross's only decode pool or WAN link hung, as when it crashes) refuse it explicitly.
"""

from __future__ import annotations

import asyncio
import random
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from services.chaos.client import send_completion
from services.chaos.faults import Window, mid_stream
from services.chaos.mesh import MeshError
from services.chaos.outcomes import Outcome
from services.launcher.keeper import Liveness
from services.types import Role

if TYPE_CHECKING:
    from services.chaos.runner import RunContext

LINKS = {"wan-link": "wan", "rdma-link": "rdma"}  # a hang's target that is a KV link, by its kind
# The longest the keeper takes to kill a hung process with its default liveness settings (7 s).
KEEPER_BOUND_S = Liveness("").bound_s
# The probe: a fresh short prompt, sent BASELINE_PROBES times before the hang and every PROBE_EVERY_S
# during it; once the hang is past KEEPER_BOUND_S (found by the router, or killed by its keeper), their
# median wait for an answer must be within PROBE_MARGIN_S of the probes' median TTFT before it.
PROBE_PROMPT_TOKENS, PROBE_OUTPUT_TOKENS = 256, 8
BASELINE_PROBES, PROBE_EVERY_S, PROBE_MARGIN_S = 3, 1.0, 1.0


@dataclass(frozen=True)
class Hang:
    """SIGSTOP of the first service with role `target`, or of the KV link of kind LINKS[target]."""

    target: str

    @property
    def name(self) -> str:
        return f"hang-{self.target}"

    def process(self, run: RunContext) -> str:
        if self.target in LINKS:
            return next(link.name for link in run.mesh.plan.links
                        if link.purpose == "kv" and link.kind == LINKS[self.target])
        return run.mesh.services(Role(self.target))[0].name

    async def apply(self, run: RunContext) -> Window:
        name = self.process(run)
        rng = random.Random(f"{run.seed}-{self.name}")
        before = [await _probe(run, f"{self.name}-before-{i}", rng) for i in range(BASELINE_PROBES)]
        # A relay's sequences last a handoff's few tokens: one waiting for its KV is as much in the middle.
        streaming = True if self.target in LINKS else await mid_stream(run, name, or_receiving=True)
        start = run.now()
        pid = run.mesh.hang(name)
        stop = asyncio.Event()
        probing = asyncio.create_task(self._probe_during(run, rng, stop))
        try:
            down_s = await run.mesh.restarted(name, pid)
        except MeshError:
            run.mesh.resume(pid)
            raise
        finally:
            stop.set()
            during = await probing
        ttfts = [o.ttft_s for o in before if o.kind == "completed" and o.ttft_s is not None]
        return Window(self.name, start, run.now(), {
            "process": name, "mid_stream": streaming, "old_pid": pid, "new_pid": run.mesh.service_pid(name),
            "down_s": round(down_s, 3), "restarts": run.mesh.restarts(name),
            "hung_kills": run.mesh.hung_kills(name),
            "probe_baseline_s": round(statistics.median(ttfts), 3) if ttfts else None,
            "probes": [[round(o.send_s - start, 2), o.kind, _answer_s(o)] for o in during]})

    async def _probe_during(self, run: RunContext, rng: random.Random, stop: asyncio.Event) -> list[Outcome]:
        """A probe every PROBE_EVERY_S until `stop`, each concurrent with the rest; their outcomes."""
        sent = []
        while not stop.is_set():
            sent.append(asyncio.create_task(_probe(run, f"{self.name}-during-{len(sent)}", rng)))
            try:
                await asyncio.wait_for(stop.wait(), PROBE_EVERY_S)  # the probes' pace
            except TimeoutError:
                pass
        return list(await asyncio.gather(*sent))


def _answer_s(outcome: Outcome) -> float | None:
    """How long the probe waited for its answer: its first token, or its explicit error."""
    if outcome.kind == "completed" and outcome.ttft_s is not None:
        return round(outcome.ttft_s, 3)
    return round(outcome.end_s - outcome.send_s, 3) if outcome.kind == "failed" else None


async def _probe(run: RunContext, request_id: str, rng: random.Random) -> Outcome:
    prompt = [rng.randrange(1000, 30000) for _ in range(PROBE_PROMPT_TOKENS)]
    outcome = Outcome(request_id, "probe")
    run.extra.append(outcome)
    return await send_completion(run.target, outcome, prompt, PROBE_OUTPUT_TOKENS)


def hang_targets(mode: str) -> list[str]:
    """Every role and KV link of the mode's mesh: pdd has a relay tier and an intra-DC link, pd-cross neither."""
    roles = ["prefill", "relay-decode", "main-decode"] if mode == "pdd" else ["prefill", "decode"]
    return [*roles, "wan-link", *(["rdma-link"] if mode == "pdd" else [])]


def hangs_check(phases, sla_ttft_s: float) -> list[str]:
    """TTFT p99 of the requests sent during each hang within the SLA plus the keeper's bound; every
    hang ended by the keeper's liveness check (not by the process waking up on its own); and the
    mesh serving a concurrent probe at its baseline once the hang is past that bound."""
    problems = []
    for phase in phases:
        bound = sla_ttft_s + KEEPER_BOUND_S
        if phase.ttft_p99_fault_s is not None and phase.ttft_p99_fault_s > bound:
            problems.append(f"{phase.name}: TTFT p99 during the hang {phase.ttft_p99_fault_s:.2f} s exceeds the SLA "
                            f"plus the keeper's bound ({sla_ttft_s:g} + {KEEPER_BOUND_S:g} s)")
        if phase.notes.get("hung_kills", 0) < 1:
            problems.append(f"{phase.name}: the keeper's liveness check did not kill {phase.notes.get('process')}")
        problems += _probes_served(phase)
    return problems


def _probes_served(phase) -> list[str]:
    """Every probe sent once the hang was past KEEPER_BOUND_S was answered, and their median wait for the
    answer (first token, or explicit error) is within PROBE_MARGIN_S of the baseline's median TTFT.

    An explicit error is an answer where the mode has no other path, as its crash gives one (pd-cross's
    only decode pool, its only WAN link); tests/chaos asserts that pdd serves every probe. Medians, as
    one request's TTFT on the shared machine spreads by more than the margin with no fault at all (the
    warm-ups' p99 is 5-7 x their p50)."""
    baseline = phase.notes.get("probe_baseline_s")
    if baseline is None:
        return [f"{phase.name}: no probe completed before the hang, so there is no baseline"]
    past = [(after, kind, wait) for after, kind, wait in phase.notes.get("probes", []) if after >= KEEPER_BOUND_S]
    problems = [f"{phase.name}: the probe sent {after:.1f} s into the hang was {kind}"
                for after, kind, wait in past if wait is None]
    waits = [wait for _, _, wait in past if wait is not None]
    if waits and statistics.median(waits) > baseline + PROBE_MARGIN_S:
        problems.append(f"{phase.name}: the probes past {KEEPER_BOUND_S:g} s into the hang waited a median "
                        f"{statistics.median(waits):.3f} s for their answer against the baseline's {baseline:.3f} s "
                        f"+ {PROBE_MARGIN_S:g} s")
    return problems
