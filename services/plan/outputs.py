"""A plan's outputs: plan.json, one scenario YAML per architecture's optimum, report.md and the plots.

The scenario files are what `pdd-emu up --scenario FILE` and `pdd-emu simulate --scenario FILE` take unchanged.
`plain_words` says the answer in three or four lines (the end of `make run`).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from services.plan import charts
from services.plan.knees import Simulated
from services.plan.planner import Plan, frontier
from services.plan.screen import Screened

FRONTIER_ROWS = 12  # a frontier's points kept in plan.json


def _pools(simulated: Simulated) -> list[dict]:
    return [{"role": p.role.value, "dc": p.dc, "gpu": p.layout.gpu, "tp": p.layout.tp,
             "dp_attention": p.layout.dp_attention, "ep": p.layout.ep, "count": p.count}
            for p in simulated.screened.candidate.pools]


def _measured(simulated: Simulated) -> dict:
    point = simulated.at_knee()
    if point is None:
        return {}
    s, arch = point.stats, simulated.screened.candidate.architecture
    # the engines' counters are read per role (services/experiments/economics/window.py): a colocated pool's
    # are neither prefill's nor decode's, and only PDD has a relay
    return {"prefill_busy": s.prefill_busy, "decode_kv_usage": s.md_kv_usage if arch != "colocated" else None,
            "line": s.wan_utilisation, "relay_token_share": s.rld_token_share if arch == "pdd" else None,
            "ttft_p99_s": point.ttft_s.p99, "tpot_p90_s": point.tpot_s.p90}


def _architecture(simulated: Simulated, preset: Path) -> dict:
    screened, candidate = simulated.screened, simulated.screened.candidate
    return {
        "cost_per_hour": round(screened.cost_per_hour, 4),
        "goodput_rps": round(simulated.goodput_rps, 4),
        "goodput_ci": [round(v, 4) for v in simulated.interval],
        "goodput_seeds": [round(v, 4) for v in simulated.values],
        "knee_rate_rps": round(simulated.knee_rate_rps, 4),
        # what `pdd-emu simulate --rate` at 90% of the knee rate should serve (the plan's check, docs/plan.md)
        "goodput_at_90pct_knee_rps": _rounded(simulated.goodput_at(0.9 * simulated.knee_rate_rps)),
        "bounded": simulated.bounded,
        "bcr": round(simulated.goodput_rps / screened.cost_per_hour, 6) if screened.cost_per_hour else None,
        "binding_stage": screened.binding_stage,
        "utilisation": screened.utilisation,  # the screen's, at its knee
        "measured_at_knee": _measured(simulated),  # the simulation's, at seed 0's highest passing point
        "screen_goodput_rps": round(screened.goodput_rps, 4),
        "preset": str(preset),
        "deployment": candidate.label(),
        "step_budget_tokens": candidate.budget_tokens,
        "line": None if candidate.line is None or candidate.architecture in ("colocated", "pd-intra") else
        {"rate_bps": candidate.line.rate_bps, "price_per_hour": candidate.line.price_per_hour},
        "pdd": None if candidate.knobs is None else vars(candidate.knobs),
        "pools": _pools(simulated),
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _frontier(rows: list[Screened]) -> list[dict]:
    front = frontier(rows)
    step = max(1, len(front) // FRONTIER_ROWS)
    return [{"cost_per_hour": round(s.cost_per_hour, 4), "goodput_rps": round(s.goodput_rps, 4),
             "binding_stage": s.binding_stage, "deployment": s.candidate.label()} for s in front[::step]]


def plan_json(plan: Plan, presets: dict[str, Path]) -> dict:
    spec = plan.spec
    return {
        "objective": spec.objective,
        "budget_per_hour": spec.budget_per_hour,
        "target_rps": spec.target_rps,
        "winner": plan.winner,
        "tie": plan.tie,
        "model": spec.model,
        "workload": spec.workload,
        "slo": spec.slo.model_dump(),
        "workload_sample": {"prompt_tokens": round(plan.sample.mean_prompt, 1),
                            "missed_tokens": round(plan.sample.mean_missed, 1),
                            "output_tokens": round(plan.sample.mean_output, 1), "hit": round(plan.sample.mean_hit, 4)},
        "architectures": {arch: _architecture(s, presets[arch]) if s is not None else None
                          for arch, s in plan.optimum.items()},
        "frontier": {arch: _frontier(rows) for arch, rows in plan.screened.items()},
        "candidates_screened": {arch: len(rows) for arch, rows in plan.screened.items()},
        "points": plan.points,
    }


def write_presets(plan: Plan, out: Path) -> dict[str, Path]:
    folder = out / "scenarios"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for arch, simulated in plan.optimum.items():
        path = paths[arch] = folder / f"{arch}.yaml"
        if simulated is not None:
            path.write_text(yaml.safe_dump(simulated.scenario.model_dump(mode="json"), sort_keys=False))
    return paths


def plain_words(data: dict) -> list[str]:
    """The plan's answer in three or four plain lines: who wins, why (the binding stage), what it means."""
    winner = data["winner"]
    if winner is None:
        return ["No architecture meets the objective with the GPUs and budget given: raise the budget or lower "
                "the target."]
    best = data["architectures"][winner]
    others = {a: v for a, v in data["architectures"].items() if v is not None and a != winner}
    low, high = best["goodput_ci"]
    spread = f"95% CI {low:.2f}-{high:.2f}" if high > low else "one seed, no interval"
    lines = [f"Best buy: {winner}, {best['goodput_rps']:.2f} req/s within the SLA ({spread}) for "
             f"${best['cost_per_hour']:.2f}/h: {best['deployment']}."]
    if data["tie"]:
        lines.append(f"It is a tie within the seeds' spread: {', '.join(data['tie'])} are as good; pick on other grounds.")
    if others:
        runner = max(others, key=lambda a: others[a]["bcr"] or 0.0)
        gain = (best["bcr"] or 0.0) / (others[runner]["bcr"] or float("inf")) - 1 if others[runner]["bcr"] else None
        lines.append(f"Why: its {best['binding_stage']} stage sets its knee; the best other, {runner}, is bound by "
                     f"its {others[runner]['binding_stage']} stage"
                     + (f", and {winner} serves {gain:.0%} more goodput per dollar." if gain is not None and gain > 0
                        else "."))
    if "pdd" in data["architectures"]:
        pdd = data["architectures"]["pdd"]
        verdict = ("PDD pays here." if winner == "pdd" else
                   "PDD does not pay here" + (f": its {pdd['binding_stage']} stage binds first." if pdd else "."))
        lines.append(verdict)
    return lines


def answer_lines(out: Path) -> list[str]:
    """The plain-words answer of the plan written to `out` (its plan.json): what `make run` can end with."""
    return plain_words(json.loads((Path(out) / "plan.json").read_text()))


def write_outputs(plan: Plan, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    presets = write_presets(plan, out)
    data = plan_json(plan, presets)
    data["plots"] = [str(p) for p in charts.plot_all(plan, out)]
    (out / "plan.json").write_text(json.dumps(data, indent=2) + "\n")
    (out / "report.md").write_text("\n".join(report_lines(data)) + "\n")
    return data


def report_lines(data: dict) -> list[str]:
    objective = (f"the most SLA goodput for ${data['budget_per_hour']:g}/h" if data["objective"] == "max-goodput"
                 else f"the least cost for {data['target_rps']:g} req/s of SLA goodput")
    w = data["workload_sample"]
    lines = ["# pdd-emu plan", "", f"{data['model']}, workload `{data['workload']}` (mean prompt {w['prompt_tokens']:.0f}"
             f" tokens, {w['missed_tokens']:.0f} missed, {w['output_tokens']:.0f} out); objective: {objective}.", "",
             *plain_words(data), "",
             "| architecture | $/h | max goodput (req/s) | 95% CI | knee rate | BCR | binding | deployment |",
             "| --- | ---: | ---: | --- | ---: | ---: | --- | --- |"]
    for arch, a in data["architectures"].items():
        if a is None:
            lines.append(f"| {arch} | - | - | - | - | - | - | nothing within the objective |")
            continue
        lines.append(f"| {arch} | {a['cost_per_hour']:.2f} | {a['goodput_rps']:.2f} | {a['goodput_ci'][0]:.2f}-"
                     f"{a['goodput_ci'][1]:.2f} | {a['knee_rate_rps']:.2f} | {a['bcr']:.3f} | {a['binding_stage']} | "
                     f"{a['deployment']} |")
    lines += ["", "Screened candidates: " + ", ".join(f"{k} {v}" for k, v in data["candidates_screened"].items())
              + f"; simulated points: {data['points']}.", "",
              "Each architecture's scenario: " + ", ".join(f"`{a['preset']}`" for a in data["architectures"].values()
                                                          if a is not None) + " (`pdd-emu up --scenario FILE`).", ""]
    lines += [f"![{Path(p).stem}]({Path(p).name})" for p in data.get("plots", [])]
    return lines
