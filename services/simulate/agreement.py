"""Hold a simulation to the mesh: the same workload and seed on both, compared request by request.

`bench_mesh` drives a running mesh's router with the bench's own client
(loadgen/bench/client.py) through the same `drive` a simulation uses, so both
sides send the same requests at the same offsets; `compare` lines the two up
(docs/simulate.md, "Agreement with the mesh"). The bounds are the issue's:
P50 and P90 within max(5%, 10 ms), P99 within 10%, the same text for every
request both completed, the same pipeline for at least 95% of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp

from loadgen.bench.client import SSE_LINE_LIMIT, stream_completion
from loadgen.bench.config import BenchConfig
from loadgen.bench.records import RequestRecord
from loadgen.bench.runner import discover_model
from loadgen.plan import RequestPlan
from loadgen.summary import SlaConfig, summarize
from loadgen.tokens import DEFAULT_VOCAB
from services.simulate.run import Driven, drive

METRICS = ("ttft_s", "tpot_s", "e2e_s")
# (relative, absolute) bound per percentile: the agreement bounds
BOUNDS = {"p50": (0.05, 0.010), "p90": (0.05, 0.010), "p99": (0.10, 0.0)}
SAME_PIPELINE = 0.95


async def bench_mesh(url: str, config: BenchConfig, ramp_s: float = 0.0,
                     send_at: Mapping[str, float] | None = None) -> Driven:
    """`config`'s workload against the router at `url`, as `pdd-emu bench` sends it; records and token ids.

    `ramp_s`: a closed loop's users join over that time, as in a simulation given the same. `send_at`:
    each request sent at that offset (a simulation's `send_s`), or when ready if later (drive.py)."""
    vocab = getattr(config.workload_config, "vocab", DEFAULT_VOCAB)
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=config.request_timeout_s)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, read_bufsize=SSE_LINE_LIMIT) as http:
        model = config.model or await discover_model(http, url)

        async def send(plan: RequestPlan, send_s: float):
            return await stream_completion(http, config.endpoint, model, plan, timeout_s=config.request_timeout_s,
                                           send_s=send_s, vocab=vocab)

        return await drive(config, send, ramp_s, send_at=send_at)


@dataclass
class Agreement:
    requests: int  # completed on both sides
    same_text: int
    same_pipeline: int
    percentiles: dict[str, dict[str, tuple[float, float]]]  # metric -> p50/p90/p99 -> (mesh, simulation)

    def violations(self) -> list[str]:
        """Every bound broken, in words; empty when the two agree."""
        out = []
        if self.same_text != self.requests:
            out.append(f"text differs on {self.requests - self.same_text} of {self.requests} requests")
        if self.same_pipeline < SAME_PIPELINE * self.requests:
            out.append(f"pipeline the same on only {self.same_pipeline} of {self.requests} requests")
        for metric, table in self.percentiles.items():
            for p, (mesh, sim) in table.items():
                rel, abs_ = BOUNDS[p]
                if abs(sim - mesh) > max(rel * abs(mesh), abs_):
                    out.append(f"{metric} {p}: simulation {sim * 1e3:.1f} ms, mesh {mesh * 1e3:.1f} ms")
        return out


def _summary(records: list[RequestRecord]):
    return summarize([r.row() for r in records], sla=SlaConfig(), workload="")


def compare(mesh: Driven, sim: Driven) -> Agreement:
    """Line up two runs of the same workload and seed by request id; percentiles over the requests both completed."""
    sim_by_id = {r.id: r for r in sim.records if r.ok}
    pairs = [(m, sim_by_id[m.id]) for m in mesh.records if m.ok and m.id in sim_by_id]
    same_text = sum(mesh.outputs.get(m.id) == sim.outputs.get(s.id) for m, s in pairs)
    same_pipeline = sum((m.pdd or {}).get("pipeline") == (s.pdd or {}).get("pipeline") for m, s in pairs)
    mesh_summary, sim_summary = _summary([m for m, _ in pairs]), _summary([s for _, s in pairs])
    percentiles = {}
    for metric in METRICS:
        ours, theirs = getattr(sim_summary, metric), getattr(mesh_summary, metric)
        if theirs.p50 is None:
            continue  # e.g. TPOT of single-token outputs
        percentiles[metric] = {p: (getattr(theirs, p), getattr(ours, p)) for p in BOUNDS}
    return Agreement(len(pairs), same_text, same_pipeline, percentiles)
