"""The soak: Locust, headless, at pdd-mini's rated load with no fault; zero errors, memory bounded.

RATED_USERS closed-loop Locust users, each running agentic sessions with a
500 ms think time, offer about 4 requests per second, which two cores serve
with no error and TTFT p99 about a second (docs/reliability.md §Load). The
RSS of every process of the mesh is read from /proc/PID/status after a
warm-up, at 60% of the run and at the end; no process may grow by more than
RSS_GROWTH_BOUND_KIB after its warm-up. Caches keep filling for a while (the
prefix caches up to their block capacity, the router's token-text cache up to
the vocabulary), so some growth is expected; a leak does not level off.
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import aiohttp

import loadgen
from services.chaos.mesh import ChaosMesh
from services.chaos.resources import wait_at_rest
from services.chaos.scenarios import STEADY_WORKLOAD
from services.types import MissingExtra

RATED_USERS = 6
WARMUP_SHARE = 0.2  # RSS "at start" is read this far into the run: after the caches warmed up
MID_SHARE = 0.6
RSS_GROWTH_BOUND_KIB = 64 * 1024
LOCUST_GRACE_S = 120.0
REQUEST_DEADLINE_S = 60.0
REST_WAIT_S = 30.0
FLAGGED = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b")  # the mesh's "name LEVEL logger:" and Locust's "host/LEVEL/"
WARNINGS_SHOWN = 5  # per process, the last ones: a failed request's trail through the mesh


class SoakError(RuntimeError):
    pass


@dataclass
class SoakReport:
    duration_s: float
    users: int
    requests: int
    failures: int
    rps: float
    ttft_ms: dict[str, float]
    rss_kib: dict[str, dict[str, int | None]]
    violations: list[str] = field(default_factory=list)
    failure_reasons: list[str] = field(default_factory=list)  # Locust's, with how often each was seen
    mesh_warnings: dict[str, list[str]] = field(default_factory=dict)  # the last WARNING/ERROR lines, by process

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "ok": self.ok}, indent=2)

    def to_text(self) -> str:
        lines = [f"soak on pdd-mini: {'OK' if self.ok else 'VIOLATED'}: {self.users} Locust users for "
                 f"{self.duration_s:.0f} s, {self.requests} requests ({self.rps:.2f} req/s), {self.failures} failed",
                 f"  TTFT ms p50 {self.ttft_ms.get('p50')} p99 {self.ttft_ms.get('p99')}",
                 "  RSS KiB (after the warm-up, at 60% of the run, at the end):"]
        lines += [f"    {name:<26} {v['start']} -> {v['mid']} -> {v['end']}" for name, v in self.rss_kib.items()]
        lines += [f"  VIOLATION: {v}" for v in self.violations]
        lines += [f"  failed: {reason}" for reason in self.failure_reasons]
        for name, warnings in self.mesh_warnings.items():
            lines += [f"  {name} logged:"] + [f"    {line}" for line in warnings]
        return "\n".join(lines)


def run_soak(duration_s: float, users: int | None, run_dir: Path | None, seed: int = 0) -> SoakReport:
    users = users or RATED_USERS
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="pdd-emu-soak-"))
    mesh = ChaosMesh("pdd-mini", [], run_dir)
    mesh.start()
    try:
        rss_start: dict[str, int | None] = {}
        rss_mid: dict[str, int | None] = {}
        timers = [threading.Timer(duration_s * share, lambda into=into: into.update(
            {n: mesh.rss_kib(n) for n in mesh.processes})) for share, into in ((WARMUP_SHARE, rss_start),
                                                                               (MID_SHARE, rss_mid))]
        for timer in timers:
            timer.start()
        try:
            rows = _locust(mesh.router_url, run_dir / "locust", duration_s, users, seed)
        finally:
            for timer in timers:
                timer.cancel()
        rss_end = {n: mesh.rss_kib(n) for n in mesh.processes}
        busy = asyncio.run(_left_busy(mesh))
    finally:
        mesh.stop()
    e2e, ttft = rows[("E2E", "/v1/completions")], rows[("TTFT", "/v1/completions")]
    requests, failures = int(e2e["Request Count"]), int(e2e["Failure Count"])
    report = SoakReport(duration_s, users, requests, failures, round(requests / duration_s, 2),
                        {"p50": float(ttft["50%"]), "p99": float(ttft["99%"])},
                        {n: {"start": rss_start.get(n), "mid": rss_mid.get(n), "end": rss_end.get(n)}
                         for n in rss_end})
    report.violations += [f"not at rest after the run: {reason}" for reason in busy]
    if failures or not requests:
        report.violations.append(f"{failures} of {requests} requests failed (see {run_dir}/locust_failures.csv)")
        report.failure_reasons = failure_reasons(run_dir / "locust_failures.csv")
    if not report.ok:  # the CI log may be all a reader has of the run
        report.mesh_warnings = mesh_warnings(run_dir / "logs")
    for name, rss in report.rss_kib.items():
        if rss["start"] and rss["end"] and rss["end"] - rss["start"] > RSS_GROWTH_BOUND_KIB:
            report.violations.append(f"{name} grew {rss['end'] - rss['start']} KiB after its warm-up "
                                     f"(bound {RSS_GROWTH_BOUND_KIB})")
    return report


def failure_reasons(failures_csv: Path) -> list[str]:
    """Each error of a failed request, most frequent first, as 'N x error'. Locust records a failure
    twice, as the POST's and as the E2E measurement's; the report counts E2E's."""
    try:
        with open(failures_csv, newline="") as rows:
            counted = [(int(row["Occurrences"]), row["Error"]) for row in csv.DictReader(rows)
                       if row["Method"] == "E2E"]
    except FileNotFoundError:
        return []
    return [f"{count} x {error}" for count, error in sorted(counted, key=lambda c: -c[0])]


def mesh_warnings(log_dir: Path, shown: int = WARNINGS_SHOWN) -> dict[str, list[str]]:
    """The last `shown` WARNING or ERROR lines of each process's log, for the processes that logged any."""
    found: dict[str, list[str]] = {}
    for log in sorted(log_dir.glob("*.log")):
        with open(log, errors="replace") as lines:
            flagged = [line.rstrip() for line in lines if FLAGGED.search(line)]
        if flagged:
            found[log.stem] = flagged[-shown:]
    return found


async def _left_busy(mesh: ChaosMesh) -> list[str]:
    async with aiohttp.ClientSession() as http:
        reasons, _ = await wait_at_rest(mesh, http, REST_WAIT_S)
    return reasons


def _locust(url: str, csv_prefix: Path, duration_s: float, users: int, seed: int) -> dict[tuple[str, str], dict]:
    locust = Path(sys.executable).with_name("locust")
    if not locust.exists():
        raise MissingExtra("the soak", "Locust", "load")
    locustfile = Path(loadgen.__file__).parent / "locustfile.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PDD_")}
    env |= {"PDD_WORKLOAD": STEADY_WORKLOAD, "PDD_SEED": str(seed), "PDD_TIMEOUT_S": str(REQUEST_DEADLINE_S)}
    cmd = [str(locust), "-f", str(locustfile), "--headless", "-u", str(users), "-r", str(users),
           "-t", f"{duration_s:.0f}s", "--csv", str(csv_prefix), "--host", url, "--only-summary",
           "--exit-code-on-error", "0", "--loglevel", "WARNING"]
    started = time.monotonic()
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=duration_s + LOCUST_GRACE_S)
    except subprocess.TimeoutExpired as exc:
        raise SoakError(f"Locust did not end within {duration_s + LOCUST_GRACE_S:.0f} s") from exc
    (csv_prefix.parent / "logs" / "locust.log").write_text(done.stderr)
    if done.returncode != 0:
        raise SoakError(f"Locust exited {done.returncode} after {time.monotonic() - started:.0f} s: "
                        f"{done.stderr[-2000:]}")
    with open(f"{csv_prefix}_stats.csv", newline="") as stats:
        return {(row["Type"], row["Name"]): row for row in csv.DictReader(stats)}
