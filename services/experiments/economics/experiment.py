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

from pathlib import Path

from services.experiments import reported
from services.experiments.comparison import Row
from services.experiments.economics import charts
from services.experiments.economics.arms import ARMS, DEPLOYMENTS, MINI
from services.experiments.economics.figures import identity_gap
from services.experiments.economics.loadpoint import LoadPointRunner
from services.experiments.economics.meshpoint import MeshPoints
from services.experiments.economics.method import Outcome, Plan, run_method
from services.experiments.economics.sensitivity import PARAMETERS, tornado
from services.experiments.economics.simpoint import SimulatedPoints
from services.experiments.runner import ExperimentResult
from services.scenario import load_scenario

# The report's agentic shape (../shared/docs/pdd-system.md): 64K context, the seven-bin hit mix
# (loadgen's default weights), and short outputs, "under 500 tokens": loadgen's default 32..480.
WORKLOAD = "agentic:context=64K"
QUICK_WORKLOAD = "agentic:context=16K,output=256..512,turns=6"  # outputs long enough to outlast the handoff
QUICK_LOADS = (4.0, 12.0)
TORNADO_FIGURE = "bcr_gain"
QUICK_WARMUP_S, QUICK_MEASURE_S = 30.0, 60.0  # emulated: a mini point's warm-up and window in the simulator
BACKENDS = ("simulate", "mesh")


def _runner(backend: str, quick: bool, out: Path) -> LoadPointRunner:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "mesh":
        if not quick:
            raise ValueError("the mesh backend runs the mini presets only (--quick); the report's scale needs the "
                             "simulator")
        return MeshPoints(out)
    return SimulatedPoints(out, QUICK_WARMUP_S, QUICK_MEASURE_S) if quick else SimulatedPoints(out)


async def economics_experiment(quick: bool, out: Path, log=print, seeds: int = 1, backend: str = "simulate"
                               ) -> ExperimentResult:
    if seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {seeds}")
    seed_list = tuple(range(seeds))
    runner = _runner(backend, quick, out / "runs")
    if quick:
        presets, plan = MINI, Plan(QUICK_WORKLOAD, seed_list, loads=QUICK_LOADS)
    else:
        presets, plan = DEPLOYMENTS, Plan(WORKLOAD, seed_list)
    log(f"economics on the {runner.backend} backend: {', '.join(presets.values())}; seeds {list(seed_list)}")
    outcome = await run_method(runner, {k: load_scenario(v) for k, v in presets.items()}, plan, log)
    data: dict = {"backend": runner.backend, "workload": plan.workload, "deployments": outcome.summary(),
                  "identity_gap": identity_gap(outcome.figures)}
    images = [charts.plot_goodput_curves({k: o.knees[0] for k, o in outcome.knees.items()}, out / "goodput.png")]
    ttfts = {k: list(d.reference.ttfts_s) for k, d in outcome.deployments.items() if d.reference and
             d.reference.ttfts_s}
    if ttfts:
        images.append(charts.plot_ttfts(ttfts, outcome.deployments["pd-intra"].scenario.sla.ttft_s,
                                        out / "ttft_cdf.png"))
    if not quick:
        data["arms"], data["tornado"] = await _arms_and_sensitivity(runner, plan, outcome, out, images, log)
    notes = [f"- {key}: " + "; ".join(lines) for key, lines in outcome.checks.items()]
    notes += [f"- {key}: no load failed the SLA, so its max goodput is only a lower bound"
              for key, over in outcome.knees.items() if not all(k.converged for k in over.knees)]
    return ExperimentResult("economics", quick, outcome.figures, comparison_rows(outcome), data, notes, images)


async def _arms_and_sensitivity(runner: LoadPointRunner, plan: Plan, base: Outcome, out: Path,
                                images: list[Path], log) -> tuple[dict, list[dict]]:
    keys = {"baseline": "pd-intra", "pdd-b-tp8": "pdd-b-tp8", "pdd-b-tp16-dp": "pdd", "pd-cross-b": "pd-cross"}
    arms = await run_method(runner, {keys[a.key]: a.scenario() for a in ARMS}, plan, log)
    bcr = {arm.key: arms.deployments[keys[arm.key]].bcr for arm in ARMS}
    images.append(charts.plot_bcr_bars(bcr, out / "arms_bcr.png"))
    results: dict[str, tuple[float, float | None]] = {}
    for parameter in PARAMETERS:
        values = []
        for case in (parameter.low, parameter.high):
            if case is None:
                values.append(None)
                continue
            scenarios = {}
            for key, preset in DEPLOYMENTS.items():
                scenario = load_scenario(preset)
                scenarios[key] = load_scenario(preset, case.scenario_overrides(scenario))
            moved = await run_method(runner, scenarios, Plan(case.workload(plan.workload), plan.seeds), log)
            values.append(moved.figures[TORNADO_FIGURE])
        if values[0] is not None:
            results[parameter.name] = (values[0], values[1])
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
