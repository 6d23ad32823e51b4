"""`experiment economics`: the method on the simulator at the report's scale, or at mini scale (--quick).

The full run searches the knee of each report-scale deployment (arms.py) in
the simulator (simpoint.py), then adds the iso-cost arms and the sensitivity
of the headline figure to every assumed parameter (sensitivity.py). --quick
runs pd-intra-mini, pd-cross-mini and pdd-mini on a short grid of agent
populations, in the simulator or, with backend "mesh", in the real-time mesh
(one mesh per deployment and seed): the same mini experiment on both backends
is the cross-check between them (docs/results.md, "Economics").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import replace
from pathlib import Path

from loadgen.spec import parse_spec, spec_string
from loadgen.workloads import MooncakeConfig
from services.experiments import reported
from services.experiments.comparison import Row
from services.experiments.economics import charts
from services.experiments.economics.arms import ARMS, DEPLOYMENTS, MINI
from services.experiments.economics.figures import identity_gap
from services.experiments.economics.loadpoint import LoadPointRunner
from services.experiments.economics.memo import PointMemo
from services.experiments.economics.meshpoint import MeshPoints
from services.experiments.economics.method import Outcome, Plan, run_method, together
from services.experiments.economics.cases import (TORNADO_DEPLOYMENTS, TORNADO_FIGURE, case_records, case_table,
                                                  sensitivity_cases)
from services.experiments.economics.sensitivity import tornado
from services.experiments.economics.simpoint import SimulatedPoints
from services.experiments.runner import ExperimentResult
from services.scenario import load_scenario

# The report's agentic shape (../shared/docs/pdd-system.md): 64K context, the seven-bin hit mix
# (loadgen's default weights), and short outputs, "under 500 tokens": loadgen's default 32..480.
WORKLOAD = "agentic:context=64K"
QUICK_WORKLOAD = "agentic:context=16K,output=256..512,turns=6"  # outputs long enough to outlast the handoff
QUICK_LOADS = (4.0, 12.0)
# A trace's load is its replay speed. The Mooncake conversation trace runs at 3.4 req/s recorded, so the
# search starts near the report's 80 req/s (speed 24) halved twice; on the mini presets the quick grid
# is the sample trace (loadgen/samples) at a quarter and half speed, where pd-intra-mini is near its knee.
FIRST_SPEED, SLOWEST_SPEED, QUICK_SPEEDS = 6.0, 1 / 16, (0.25, 0.5)
WARM_FACTOR = 1.08  # an arm's or case's search steps 8% from the base knee: two halvings then reach 2%
QUICK_WARMUP_S, QUICK_MEASURE_S = 30.0, 60.0  # emulated: a mini point's warm-up and window, on either backend
BACKENDS = ("simulate", "mesh")


def check_options(quick: bool, seeds: int = 1, backend: str = "simulate", workers: int = 1,
                  workload: str | None = None, resume: bool = False, deployments_only: bool = False,
                  ray_address: str | None = None, warmup_s: float | None = None,
                  measure_s: float | None = None, paced: bool = False) -> None:
    """ValueError naming the first option this experiment cannot take (the CLI's exit-2 message)."""
    if paced and backend != "mesh":
        raise ValueError("--paced sends the mesh backend's requests at the simulator's send times: add --backend mesh")
    for flag, value in (("--warmup-s", warmup_s), ("--measure-s", measure_s)):
        if value is not None and not value > 0:
            raise ValueError(f"{flag} must be a positive number of emulated seconds, got {value:g}")
    if ray_address is not None and workers > 1:
        raise ValueError("--workers sizes a local Ray; with --ray-address the cluster's CPUs run the points")
    if deployments_only and quick:
        raise ValueError("--deployments-only trims the full run; --quick already searches the deployments only")
    if seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {seeds}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    if backend == "mesh":
        if not quick:
            raise ValueError("the mesh backend runs the mini presets only: add --quick (the report's scale needs the "
                             "simulator)")
        if workers > 1 or ray_address is not None:
            raise ValueError("the mesh backend runs one load point at a time (a mesh owns the machine): drop "
                             + ("--workers" if workers > 1 else "--ray-address"))
        if resume:
            raise ValueError("--resume reuses simulated points; a mesh's points are measured afresh each time")
        if workload is not None:
            raise ValueError("--workload replays a trace in the simulator; the mesh backend runs the quick agent grid")
    workload_plan(quick, workload, (0,))  # a trace that cannot be replayed


def point_runner(backend: str, quick: bool, out: Path, workers: int = 1, resume: bool = False,
                 ray_address: str | None = None, warmup_s: float | None = None,
                 measure_s: float | None = None, paced: bool = False) -> LoadPointRunner:
    """The load-point backend; the options are those `check_options` passed."""
    if backend == "mesh":
        return MeshPoints(out, warmup_s or QUICK_WARMUP_S, measure_s or QUICK_MEASURE_S, paced)
    # Simulated points are deterministic: each is run once, however many searches ask for it (memo.py).
    if quick:
        # Fixed windows, as the mesh backend's: the quick run on both backends is their cross-check.
        points = SimulatedPoints(out, warmup_s or QUICK_WARMUP_S, measure_s or QUICK_MEASURE_S, window_requests=None,
                                 workers=workers, ray_address=ray_address)
    else:
        given = {"warmup_s": warmup_s, "measure_s": measure_s}
        points = SimulatedPoints(out, **{k: v for k, v in given.items() if v}, workers=workers,
                                 ray_address=ray_address)
    return PointMemo(points, store=out / "points", resume=resume)


def workload_plan(quick: bool, workload: str | None, seeds: tuple[int, ...]) -> Plan:
    """The report's agentic shape (None), or a Mooncake trace replayed at a searched speed."""
    if workload is None:
        return Plan(QUICK_WORKLOAD, seeds, loads=QUICK_LOADS) if quick else Plan(WORKLOAD, seeds)
    try:
        config = parse_spec(workload)
    except ValueError as exc:
        raise ValueError(f"--workload: {exc}") from None
    if not isinstance(config, MooncakeConfig):
        raise ValueError(f"--workload {workload!r}: economics runs the report's agentic workload (the default) or a "
                         "Mooncake trace, mooncake:FILE[:key=value,...]; its load is the replay speed")
    if not config.file.is_file():
        raise ValueError(f"--workload: trace file {str(config.file)!r} does not exist")
    spec = spec_string(config)
    if quick:
        return Plan(spec, seeds, loads=QUICK_SPEEDS, integral=False)
    return Plan(spec, seeds, first_load=FIRST_SPEED, integral=False, smallest=SLOWEST_SPEED)


async def economics_experiment(quick: bool, out: Path, log=print, seeds: int = 1, backend: str = "simulate",
                               workers: int = 1, workload: str | None = None, resume: bool = False,
                               deployments_only: bool = False, ray_address: str | None = None,
                               warmup_s: float | None = None, measure_s: float | None = None,
                               paced: bool = False) -> ExperimentResult:
    check_options(quick, seeds, backend, workers, workload, resume, deployments_only, ray_address, warmup_s,
                  measure_s, paced)
    seed_list = tuple(range(seeds))
    runner = point_runner(backend, quick, out / "runs", workers, resume, ray_address, warmup_s, measure_s, paced)
    presets, plan = (MINI if quick else DEPLOYMENTS), workload_plan(quick, workload, seed_list)
    log(f"economics on the {runner.backend} backend: {', '.join(presets.values())}; seeds {list(seed_list)}"
        + (f"; {workers} workers" if workers > 1 else "") + (f"; the Ray cluster at {ray_address}" if ray_address
                                                              else "")
        + (f"; {warmup_s:g} s of warm-up a point" if warmup_s else "")
        + (f"; windows of {measure_s:g} s at most" if measure_s else "")
        + ("; each point's sends paced by its simulation" if paced else ""))
    base = asyncio.ensure_future(run_method(runner, {k: load_scenario(v) for k, v in presets.items()}, plan, log))
    try:
        if quick or deployments_only:
            outcome, arms, moved = await base, None, []
        else:
            cases = sensitivity_cases(plan)
            outcome, (arms, moved) = await together(runner, [base, _after_base(runner, base, plan, cases, log)])
    finally:
        close = getattr(runner, "close", None)
        if close is not None:
            close()
    data: dict = {"backend": runner.backend, "workload": plan.workload, "deployments": outcome.summary(),
                  "point_settings": getattr(runner, "settings", dict)(),
                  "identity_gap": identity_gap(outcome.figures)}
    images = [charts.plot_goodput_curves({k: o.knees[0] for k, o in outcome.knees.items()}, out / "goodput.png")]
    ttfts = {k: list(d.reference.ttfts_s) for k, d in outcome.deployments.items() if d.reference and
             d.reference.ttfts_s}
    if ttfts:
        images.append(charts.plot_ttfts(ttfts, outcome.deployments["pd-intra"].scenario.sla.ttft_s,
                                        out / "ttft_cdf.png"))
    if arms is not None:
        data["arms"], data["tornado"] = _arms_and_tornado(arms, outcome, cases, moved, out, images)
        data["cases"] = case_records(cases, moved)
    if isinstance(runner, PointMemo):
        data["points"] = {"run": runner.run, "reused": runner.reused, "loaded": runner.loaded}
        log(f"{runner.run} points run, {runner.reused} answered from a point already run"
            + (f" ({runner.loaded} read from {runner.store})" if runner.loaded else ""))
    notes = [f"- {key}: " + "; ".join(lines) for key, lines in outcome.checks.items()]
    if arms is not None:
        notes += ["", *case_table(data["cases"])]
    notes += [f"- {key}: no load failed the SLA, so its max goodput is only a lower bound"
              for key, over in outcome.knees.items() if not all(k.converged for k in over.knees)]
    return ExperimentResult("economics", quick, outcome.figures, comparison_rows(outcome), data, notes, images)


ARM_KEYS = {"baseline": "pd-intra", "pdd-b-tp8": "pdd-b-tp8", "pdd-b-tp16-dp": "pdd", "pd-cross-b": "pd-cross"}


async def _after_base(runner: LoadPointRunner, base: Awaitable[Outcome], plan: Plan, cases: list, log
                      ) -> tuple[Outcome, list[Outcome]]:
    """The arms' and every sensitivity case's outcome, each search started at its deployment's base knee.

    An arm or a case moves a knee by tens of percent at most, so a search that starts there
    and steps by WARM_FACTOR brackets it in a few points near the knee, and one that moves it
    not at all (the arms that are the deployments, the price cases) in the base's own two.
    Every search runs at once on a parallel runner: the points queue for its workers.
    """
    knees = (await base).knees
    knees = {**knees, "pdd-b-tp8": knees["pdd"]}  # PDD with another main-decode layout starts at PDD's knee
    arms_run = run_method(runner, {ARM_KEYS[a.key]: a.scenario() for a in ARMS},
                          replace(plan.warm(knees, WARM_FACTOR), compare_ttfts=False), log)
    arms, *moved = await together(runner, [arms_run, *(run_method(runner, scenarios,
                                                                  case_plan.warm(knees, WARM_FACTOR), log)
                                                       for _, _, scenarios, case_plan in cases)])
    return arms, moved


def _arms_and_tornado(arms: Outcome, base: Outcome, cases: list, moved: list[Outcome], out: Path,
                      images: list[Path]) -> tuple[dict, list[dict]]:
    bcr = {arm.key: arms.deployments[ARM_KEYS[arm.key]].bcr for arm in ARMS}
    images.append(charts.plot_bcr_bars(bcr, out / "arms_bcr.png"))
    values: dict[str, list[float | None]] = {}
    for (name, index, _, _), outcome in zip(cases, moved):
        values.setdefault(name, [None, None])[index] = outcome.figures[TORNADO_FIGURE]
    results = {name: (low, high) for name, (low, high) in values.items() if low is not None}
    base_value = base.figures[TORNADO_FIGURE]
    bars = tornado(base_value, results) if base_value is not None else []
    if bars:
        images.append(charts.plot_tornado(TORNADO_FIGURE, base_value, bars, out / "tornado.png"))
    return bcr, [vars(bar) for bar in bars]


def comparison_rows(outcome: Outcome) -> list[Row]:
    f, d = outcome.figures, outcome.deployments
    rows = [
        Row("TTFT P99 reduction, PDD vs cross-DC PD", reported.TTFT_P99_REDUCTION, f["ttft_p99_reduction"], "%"),
        Row("SLA goodput gain, PDD vs intra-DC PD", reported.GOODPUT_GAIN, f["goodput_gain"], "%"),
        Row("BCR gain, PDD vs intra-DC PD", reported.BCR_GAIN, f["bcr_gain"], "%"),
        Row("cost reduction, PDD vs intra-DC PD", reported.COST_REDUCTION, f["cost_reduction"], "%"),
        Row("RLD share of output tokens", reported.RLD_TOKEN_SHARE, f["rld_token_share"], "%"),
        Row("singular share of requests", None, f["singular_share"], "%"),
    ]
    for key, paper in reported.TTFT_S.items():
        point = d[key].reference
        for i, q in enumerate(("p50", "p90", "p99")):
            rows.append(Row(f"TTFT {q.upper()} {key}", paper[i], getattr(point.ttft_s, q) if point else None, "s"))
    return rows
