"""Hangs: SIGSTOP of a role's process or of a link's, held until its keeper notices (docs/reliability.md §Hangs).

A stopped process keeps its sockets open and answers nothing, so nothing fails at once: the
router's call deadlines (services/router/deadlines.py) send new requests down the paths a crash
gives them, and the keeper's liveness check (services/launcher/keeper.py) kills the process within
its bound, after which the keeper restarts it as after any crash. The fault is over when the
restarted process answers /health; should the keeper not act within RESTART_WAIT_S, the process
is continued (SIGCONT) and the run fails, naming the hang that was never noticed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from services.chaos.faults import Window, mid_stream
from services.chaos.mesh import MeshError
from services.launcher.keeper import Liveness
from services.types import Role

if TYPE_CHECKING:
    from services.chaos.runner import RunContext

LINKS = {"wan-link": "wan", "rdma-link": "rdma"}  # a hang's target that is a KV link, by its kind
# The longest the keeper takes to kill a hung process with its default liveness settings (7 s).
KEEPER_BOUND_S = Liveness("").bound_s


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
        streaming = True if self.target in LINKS else await mid_stream(run, name)
        start = run.now()
        pid = run.mesh.hang(name)
        try:
            down_s = await run.mesh.restarted(name, pid)
        except MeshError:
            run.mesh.resume(pid)
            raise
        return Window(self.name, start, run.now(), {
            "process": name, "mid_stream": streaming, "old_pid": pid, "new_pid": run.mesh.service_pid(name),
            "down_s": round(down_s, 3), "restarts": run.mesh.restarts(name),
            "hung_kills": run.mesh.hung_kills(name)})


def hang_targets(mode: str) -> list[str]:
    """Every role and KV link of the mode's mesh: pdd has a relay tier and an intra-DC link, pd-cross neither."""
    roles = ["prefill", "relay-decode", "main-decode"] if mode == "pdd" else ["prefill", "decode"]
    return [*roles, "wan-link", *(["rdma-link"] if mode == "pdd" else [])]


def hangs_check(phases, sla_ttft_s: float) -> list[str]:
    """TTFT p99 of the requests sent during each hang within the SLA plus the keeper's bound, and every
    hang ended by the keeper's liveness check (not by the process waking up on its own)."""
    problems = []
    for phase in phases:
        bound = sla_ttft_s + KEEPER_BOUND_S
        if phase.ttft_p99_fault_s is not None and phase.ttft_p99_fault_s > bound:
            problems.append(f"{phase.name}: TTFT p99 during the hang {phase.ttft_p99_fault_s:.2f} s exceeds the SLA "
                            f"plus the keeper's bound ({sla_ttft_s:g} + {KEEPER_BOUND_S:g} s)")
        if phase.notes.get("hung_kills", 0) < 1:
            problems.append(f"{phase.name}: the keeper's liveness check did not kill {phase.notes.get('process')}")
    return problems
