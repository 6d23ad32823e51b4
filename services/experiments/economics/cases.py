"""The sensitivity cases as runs: each case's deployments and plan, and what each case's run found.

A case runs the two deployments its figure (TORNADO_FIGURE, PDD against the baseline)
compares, and a case of the line's mechanisms also runs cross-DC PD at its reference load
for the TTFT figure; its record keeps every headline figure, knee and check, so that a
case's move of any figure can be read with the mechanism its checks name (docs/results.md,
"Economics: the arms and the sensitivity").
"""

from __future__ import annotations

from dataclasses import replace

from services.experiments.economics.arms import DEPLOYMENTS
from services.experiments.economics.method import Outcome, Plan
from services.experiments.economics.search import CASE_TOLERANCE
from services.experiments.economics.sensitivity import PARAMETERS
from services.scenario import Scenario, load_scenario

TORNADO_FIGURE = "bcr_gain"
TORNADO_DEPLOYMENTS = ("pd-intra", "pdd")  # what TORNADO_FIGURE compares: a case searches these two only
TTFT_ONLY = ("pd-cross",)  # what PDD's TTFT is compared with: run at a `ttfts` case's reference load only


def sensitivity_cases(plan: Plan) -> list[tuple[str, int, dict[str, Scenario], Plan]]:
    """(parameter, 0 for its low case or 1 for its high, the deployments, the plan) of every case.

    A case runs the two deployments its figure (TORNADO_FIGURE, PDD against the baseline)
    compares. One marked `ttfts` also runs cross-DC PD, at the case's reference load alone, for
    its TTFT figure; every other case compares no TTFTs (they are the base run's).
    """
    cases = []
    presets = {key: load_scenario(DEPLOYMENTS[key]) for key in (*TORNADO_DEPLOYMENTS, *TTFT_ONLY)}
    for parameter in PARAMETERS:
        for index, case in enumerate((parameter.low, parameter.high)):
            if case is None:
                continue
            if case.workload_option is not None and not plan.integral:
                continue  # the agentic workload's shape (hit mix, output length): a trace has its own
            ttft_only = TTFT_ONLY if case.ttfts else ()
            keys = (*TORNADO_DEPLOYMENTS, *ttft_only)
            overrides = {key: case.scenario_overrides(presets[key]) for key in keys}
            scenarios = {key: load_scenario(DEPLOYMENTS[key], overrides[key]) for key in keys}
            # Only a deployment the case changes starts its search at the scaled knee; one it leaves as
            # it was searches from its base knee, where the base run's points answer at once.
            scales = {key: case.start_scale for key in TORNADO_DEPLOYMENTS
                      if overrides[key] or case.workload_option is not None}
            cases.append((parameter.name, index, scenarios,
                          replace(plan, workload=case.workload(plan.workload), compare_ttfts=case.ttfts,
                                  reference_only=frozenset(ttft_only),
                                  start_scales=scales, tolerance=CASE_TOLERANCE)))
    return cases


def case_records(cases: list, moved: list[Outcome]) -> list[dict]:
    """Every sensitivity case's headline figures, knees and checks: what moved, and by which mechanism."""
    records = []
    for (name, index, _, _), outcome in zip(cases, moved):
        parameter = next(p for p in PARAMETERS if p.name == name)
        case = parameter.low if index == 0 else parameter.high
        records.append({"parameter": name, "case": case.label, "figures": outcome.figures,
                        "max_goodput_rps": {key: over.mean for key, over in outcome.knees.items()},
                        "knee_agents": {key: d.knee.load if d.knee else None
                                        for key, d in outcome.deployments.items()},
                        "checks": outcome.checks,
                        # the TTFT figure's load and tails (a `ttfts` case; empty for any other)
                        "ttft_p99_s": {key: d.reference.ttft_s.p99 for key, d in outcome.deployments.items()
                                       if d.reference},
                        "reference_agents": next((d.reference.load for d in outcome.deployments.values()
                                                  if d.reference), None)})
    return records


def case_table(records: list[dict]) -> list[str]:
    """The cases as report.md's table: each case's knees and every headline figure it moves."""
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:+.1%}"

    lines = ["| parameter | case | max goodput, baseline / PDD (req/s) | goodput gain | cost reduction | BCR gain | "
             "RLD share | TTFT P99 reduction |", "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in records:
        goodputs = " / ".join("-" if r["max_goodput_rps"].get(k) is None else f"{r['max_goodput_rps'][k]:.1f}"
                              for k in TORNADO_DEPLOYMENTS)
        f = r["figures"]
        lines.append(f"| {r['parameter']} | {r['case']} | {goodputs} | {pct(f['goodput_gain'])} | "
                     f"{pct(f['cost_reduction'])} | {pct(f['bcr_gain'])} | {pct(f['rld_token_share'])} | "
                     f"{pct(f['ttft_p99_reduction'])} |")
    return lines
