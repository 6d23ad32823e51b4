"""`experiment paper`: the report's three deployments, scaled, under its agentic workload (docs/results.md §Paper).

1. The intra-DC baseline climbs the staircase of agent populations first. Its
   largest population within SLA is the reference, at which every
   deployment's TTFTs are compared; the WAN line is sized so that the
   baseline's request rate there, at the workload's mean missed tokens, loads
   it to the report's utilisation (services/experiments/scaling.py).
2. Cross-DC PD and PDD climb the same staircase over that line.
3. Max goodput per deployment, cost, BCR = max goodput / cost, and the headline
   figures against the report's.

Each deployment runs at a time dilation that keeps the real output-token rate
of its largest population under `real_tokens_per_s` (services/experiments/dilation.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from loadgen.spec import parse_spec
from services.experiments import reported
from services.experiments.comparison import Row
from services.experiments.dilation import REAL_TOKENS_PER_S, dilation_for
from services.engine.batch import StepBatch
from services.engine.roofline import RooflineClock
from services.experiments.goodput import LoadPoint, MaxGoodput, max_goodput
from services.experiments.meshrun import MeshRun, run_deployment
from services.experiments.population import Step
from services.experiments.scaling import gpu_count, line_for, report_utilisation, with_wan, workload_missed_tokens
from services.experiments.steady import Staircase, StepResult
from services.scenario import Scenario, load_scenario
from services.types import Role

WORKLOAD = "agentic:context=64K,output=512..1K"
DEPLOYMENTS = {"pd-intra": "paper-pd-intra", "pd-cross": "paper-pd-cross", "pdd": "paper-pdd"}


@dataclass(frozen=True)
class PaperConfig:
    users: tuple[int, ...]  # agent populations, climbed in order
    first_ramp_s: float
    step_ramp_s: float
    settle_s: float
    measure_s: float
    real_tokens_per_s: float = REAL_TOKENS_PER_S  # the emulator's comfortable output-token rate on this machine
    workload: str = WORKLOAD
    seed: int = 0

    def staircase(self, scenario: Scenario) -> Staircase:
        steps = tuple(Step(users, self.first_ramp_s if i == 0 else self.step_ramp_s, self.settle_s, self.measure_s)
                      for i, users in enumerate(self.users))
        spec = parse_spec(self.workload)
        top_rate = expected_request_rate(scenario, max(self.users), spec.think, spec.output.mean)
        return Staircase(steps, seed=self.seed,
                         dilation=dilation_for(top_rate, spec.output.mean, self.real_tokens_per_s))


def expected_request_rate(scenario: Scenario, users: int, think_s: float, output_tokens: float,
                          context_tokens: int = 32768) -> float:
    """users / (think + output x decode step time), the step from the roofline at the pool's share of users."""
    pool = scenario.pools_with(Role.DECODE, Role.MAIN_DECODE)[0]
    clock = RooflineClock.for_names(pool.gpu, scenario.model, tp=pool.tp)
    batch = max(1, round(users / pool.count))
    step_s = clock.step_seconds(StepBatch(decode_contexts=(context_tokens,) * batch))
    return users / (think_s + output_tokens * step_s)


QUICK = PaperConfig(users=(20,), first_ramp_s=30.0, step_ramp_s=0.0, settle_s=15.0, measure_s=30.0)
FULL = PaperConfig(users=(40, 70, 100, 130, 160), first_ramp_s=60.0, step_ramp_s=15.0, settle_s=20.0, measure_s=45.0)


@dataclass
class DeploymentResult:
    key: str
    run: MeshRun
    reference_users: int
    reference_rate: float = 0.0  # the baseline's request rate at the reference population
    extra: dict = field(default_factory=dict)

    @property
    def reference(self) -> StepResult | None:
        return self.run.step_at(self.reference_users)

    @property
    def goodput(self) -> MaxGoodput:
        return max_goodput([LoadPoint(s.window.users, s.summary.sla_attainment, s.goodput_rps)
                            for s in self.run.steps])

    @property
    def goodput_rps(self) -> float | None:
        """Max goodput. A one-step run cannot find it; its SLA goodput at that load is the reference
        demand (the baseline's request rate there) times the share of requests within SLA."""
        if len(self.run.steps) == 1:
            return self.reference_rate * self.run.steps[0].summary.sla_attainment
        return self.goodput.goodput_rps

    @property
    def bcr(self) -> float | None:
        return None if self.goodput_rps is None else self.goodput_rps / self.run.cost_per_hour

    def summary(self) -> dict:
        step = self.reference
        ttft = step.summary.ttft_s if step else None
        gpus = gpu_count(self.run.scenario)
        return {
            "scenario": self.run.scenario.name, "gpus_a": gpus.a, "gpus_b": gpus.b,
            "cost_per_hour": round(self.run.cost_per_hour, 2),
            "ttft_s": None if ttft is None else {"p50": ttft.p50, "p90": ttft.p90, "p99": ttft.p99},
            "tpot_p50_s": step.summary.tpot_s.p50 if step else None,
            "request_rate_rps": step.request_rate if step else None,
            "steps": [{"users": s.window.users, "request_rate_rps": s.request_rate, "goodput_rps": s.goodput_rps,
                       "attainment": s.summary.sla_attainment, "ttft_p99_s": s.summary.ttft_s.p99}
                      for s in self.run.steps],
            "max_goodput_rps": self.goodput_rps, "max_goodput_bounded": self.goodput.bounded,
            "bcr": self.bcr, "rld_token_share": step.summary.rld_token_share if step else None,
            "wan_utilisation": self.run.wan_utilisation(step) if step and self.run.scenario.wan_price_per_hour
            else None,
            "pipelines": step.summary.pipelines if step else {},
            "time_dilation": self.run.stairs.dilation,
            "loop_lag_p99_emulated_s": self.run.worst_loop_lag_s,
            "engine_late_max_emulated_s": self.run.engine_late_max_s / self.run.stairs.dilation,
            **self.extra,
        }


async def run_paper(config: PaperConfig, out_dir: Path, log=print) -> tuple[dict, dict[str, MeshRun]]:
    """The result (headline, setup, per-deployment summaries) and each deployment's run."""
    intra_scenario = load_scenario(DEPLOYMENTS["pd-intra"])
    stairs = config.staircase(intra_scenario)
    log(f"paper: agents {list(config.users)}; pd-intra at time dilation {stairs.dilation:.2f}")
    intra = await run_deployment(intra_scenario, config.workload, stairs, out_dir / "pd-intra")
    results = {"pd-intra": DeploymentResult("pd-intra", intra, 0)}
    reference = results["pd-intra"].goodput.highest_passing or config.users[0]
    rate = intra.step_at(int(reference)).request_rate
    results["pd-intra"].reference_users, results["pd-intra"].reference_rate = int(reference), rate
    missed = workload_missed_tokens(config.workload, config.seed)
    line = line_for(rate, missed)
    log(f"  pd-intra: {_attainment(intra)}; reference {reference:g} agents at {rate:.2f} req/s, {missed:.0f} "
        f"missed tokens per request (workload mean) -> WAN {line / 1e9:.3f} Gbit/s")
    for key in ("pd-cross", "pdd"):
        scenario = with_wan(load_scenario(DEPLOYMENTS[key]), line)
        stairs = config.staircase(scenario)
        log(f"  {key}: time dilation {stairs.dilation:.2f}")
        run = await run_deployment(scenario, config.workload, stairs, out_dir / key)
        results[key] = DeploymentResult(key, run, int(reference), rate)
        log(f"  {key}: {_attainment(run)}")
    return assemble(results, config, int(reference), rate, missed, line), {k: r.run for k, r in results.items()}


def _attainment(run: MeshRun) -> str:
    return ", ".join(f"{s.window.users} agents: {s.request_rate:.2f} req/s, {s.summary.sla_attainment:.0%} within SLA"
                     for s in run.steps)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b in (None, 0) else a / b


def assemble(results: dict[str, DeploymentResult], config: PaperConfig, reference: int, rate: float,
             missed: float, line: float) -> dict:
    summaries = {key: r.summary() for key, r in results.items()}
    p99 = {key: (s["ttft_s"] or {}).get("p99") for key, s in summaries.items()}
    cost = {key: r.run.cost_per_hour for key, r in results.items()}
    goodput_gain = _ratio(results["pdd"].goodput_rps, results["pd-intra"].goodput_rps)
    bcr_gain = _ratio(results["pdd"].bcr, results["pd-intra"].bcr)
    headline = {
        "ttft_p99_reduction": None if _ratio(p99["pdd"], p99["pd-cross"]) is None
        else 1 - p99["pdd"] / p99["pd-cross"],
        "goodput_gain": None if goodput_gain is None else goodput_gain - 1,
        "bcr_gain": None if bcr_gain is None else bcr_gain - 1,
        "rld_token_share": summaries["pdd"]["rld_token_share"],
    }
    return {
        "headline": headline,
        "setup": {"users": list(config.users), "reference_users": reference, "reference_rate_rps": rate,
                  "workload": config.workload,
                  "missed_tokens_mean": missed, "wan_line_bps": line, "wan_utilisation_target": report_utilisation(),
                  "line_scale": line / reported.SETUP_LINE_BPS, "cost_reduction": 1 - cost["pdd"] / cost["pd-intra"]},
        "deployments": summaries,
    }


def comparison_rows(result: dict) -> list[Row]:
    h, d = result["headline"], result["deployments"]
    rows = [
        Row("TTFT P99 reduction, PDD vs cross-DC PD", reported.TTFT_P99_REDUCTION, h["ttft_p99_reduction"], "%"),
        Row("SLA goodput gain, PDD vs intra-DC PD", reported.GOODPUT_GAIN, h["goodput_gain"], "%"),
        Row("BCR gain, PDD vs intra-DC PD", reported.BCR_GAIN, h["bcr_gain"], "%"),
        Row("cost reduction, PDD vs intra-DC PD", reported.COST_REDUCTION, result["setup"]["cost_reduction"], "%"),
        Row("RLD share of output tokens", reported.RLD_TOKEN_SHARE, h["rld_token_share"], "%"),
    ]
    for key, paper in reported.TTFT_S.items():
        ttft = d[key]["ttft_s"] or {}
        for i, q in enumerate(("p50", "p90", "p99")):
            rows.append(Row(f"TTFT {q.upper()} {key}", paper[i], ttft.get(q), "s"))
    return rows
