"""Rate or population sweeps as parallel simulations on Ray: one simulation per Ray task.

Each task is one `run_simulation` in a Ray worker, a process of its own, so
each has the process's clocks to itself (`process_clocks`). The task gets the
loaded Scenario (no file is read on the worker, except a workload's trace
file) and hands back its records and summary; the driver writes each point's
bench outputs, `sweep.json` and the report as `pdd-emu sweep` does on the
mesh (loadgen/sweep.py `write_sweep`), so `pdd-emu report` reads them.

Ray is imported when a sweep runs: the rest of the CLI does not pay for it.
A local Ray (`ray.init(address="local", num_cpus=...)`) is started and stopped
by the sweep, a Ray of its own even where a cluster runs on the machine; with
an address, the sweep joins that cluster and leaves it running
(docs/campaigns.md, "Sweeps on Ray").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from loadgen.summary import Summary
from loadgen.sweep import ATTAINMENT_THRESHOLD, SweepResult, rate_folder, write_sweep
from services.scenario import Scenario
from services.simulate.run import run_simulation, write_outputs


@dataclass(frozen=True)
class SimulatedSweep:
    scenario: Scenario
    workload: str
    duration_s: float
    seed: int
    rates: tuple[float, ...] = ()  # an open-loop sweep, or
    concurrencies: tuple[int, ...] = ()  # a population sweep (closed loop)
    request_timeout_s: float = 300.0
    sla: dict | None = None  # {"ttft_s", "tpot_s"}; None: the bench's default

    @property
    def load(self) -> str:
        return "rate" if self.rates else "concurrency"

    def points(self) -> tuple[float, ...]:
        return tuple(sorted(self.rates or self.concurrencies))


def simulate_point(sweep: SimulatedSweep, point: float) -> tuple[list[str], dict[str, Any]]:
    """One point of the sweep: its requests.jsonl lines and its summary (what a Ray task returns)."""
    pacing = {"rate": point} if sweep.load == "rate" else {"concurrency": int(point)}
    run = run_simulation(sweep.scenario, sweep.workload, duration_s=sweep.duration_s, seed=sweep.seed,
                         request_timeout_s=sweep.request_timeout_s, sla=sweep.sla, **pacing)
    return [record.to_json_line() for record in run.records], run.summary


class ClusterUnreachable(ValueError):
    """A sweep or an experiment could not join the Ray cluster it was given."""


class RayMissing(ValueError):
    """Ray is not installed where the sweep runs."""


def join_cluster(ray: Any, address: str) -> None:
    """Join a running cluster; failing that, say why in one line instead of Ray's traceback."""
    try:
        ray.init(address=address, logging_level="WARNING", log_to_driver=False)
    except (ConnectionError, ray.exceptions.RayError) as exc:
        # `ray start` (Ray 2.60) turns token authentication on, and a driver only sends the
        # cluster's token when told to: the most common reason a reachable head refuses us.
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ClusterUnreachable(
            f"cannot join the Ray cluster at {address}: {reason}. A cluster started by `ray start` has token "
            "authentication on: run with RAY_AUTH_MODE=token and the cluster's token in "
            "~/.ray/auth_token or RAY_AUTH_TOKEN (docs/campaigns.md, \"Sweeps on Ray\")") from None


def import_ray() -> Any:
    """Ray itself; it is the `sweep` extra, kept out of the container image (about 250 MB installed)."""
    try:
        import ray  # a second or more to import, and only a sweep needs it
    except ImportError:
        raise RayMissing("sweep --simulate runs its points on Ray, which is not installed: "
                         "pip install 'pdd-emu[sweep]' (make venv installs it)") from None
    return ray


def start_ray(ray: Any, address: str | None, num_cpus: int | None) -> bool:
    """Join the cluster at `address`, or start a local Ray of `num_cpus`; False where Ray already runs here."""
    if ray.is_initialized():
        return False
    if address is not None:
        join_cluster(ray, address)
    else:
        # "local": a Ray of our own even where `ray start` left its address file or RAY_ADDRESS is set;
        # joining that cluster unasked would fail on num_cpus, or run on CPUs nobody offered.
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, logging_level="WARNING",
                 log_to_driver=False)
    return True


def run_on_ray(sweep: SimulatedSweep, out_dir: Path, address: str | None = None, num_cpus: int | None = None,
               progress: bool = False, threshold: float = ATTAINMENT_THRESHOLD) -> SweepResult:
    """Every point as a Ray task at once; their outputs written as they finish."""
    ray = import_ray()
    started_here = start_ray(ray, address, num_cpus)
    try:
        task = ray.remote(simulate_point)
        pending = {task.remote(sweep, point): point for point in sweep.points()}
        summaries: dict[float, Summary] = {}
        with tqdm(total=len(pending), unit="point", desc=f"sweep ({sweep.load})", disable=not progress,
                  file=sys.stderr, dynamic_ncols=True) as bar:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                point = pending.pop(done[0])
                lines, summary = ray.get(done[0])
                write_outputs(rate_folder(out_dir, point, sweep.load), lines, summary)
                summaries[point] = Summary.model_validate(summary)
                bar.update()
    finally:
        if started_here:
            ray.shutdown()
    return write_sweep(out_dir, dict(sorted(summaries.items())), threshold, sweep.load)
