"""Rate sweep: bench at each offered rate and find the max goodput rate.

The max goodput rate is the highest offered rate at which at least 90% of the
requests meet the SLA (design.md). Rates run in increasing order; by default
the sweep stops after the first rate that misses the threshold, since load
beyond it only queues more.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from loadgen.bench import BenchConfig, run_bench
from loadgen.report import Report, build_report
from loadgen.summary import Summary

ATTAINMENT_THRESHOLD = 0.9


class SweepConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    bench: BenchConfig = Field(description="settings shared by every rate; its rate and out_dir are replaced")
    rates: tuple[float, ...] = Field(min_length=1)
    out_dir: Path
    threshold: float = Field(ATTAINMENT_THRESHOLD, gt=0, le=1)
    keep_going: bool = Field(False, description="run every rate even after one misses the threshold")


@dataclass(frozen=True)
class SweepResult:
    summaries: dict[float, Summary]
    max_goodput_rate: float | None  # None when no rate met the threshold
    max_goodput_rps: float | None
    report: Report


def max_goodput_rate(summaries: dict[float, Summary], threshold: float = ATTAINMENT_THRESHOLD) -> float | None:
    passing = [rate for rate, s in summaries.items() if s.sla_attainment >= threshold]
    return max(passing) if passing else None


def rate_folder(out_dir: Path, rate: float, load: str = "rate") -> Path:
    """The bench output folder of one point: rate-4, or concurrency-16 for a population sweep."""
    return out_dir / f"{load}-{rate:g}"


async def run_sweep(config: SweepConfig) -> SweepResult:
    summaries: dict[float, Summary] = {}
    for rate in sorted(config.rates):
        bench = config.bench.model_copy(update={"rate": rate, "concurrency": None,
                                                "out_dir": rate_folder(config.out_dir, rate)})
        summaries[rate] = await run_bench(bench)
        if summaries[rate].sla_attainment < config.threshold and not config.keep_going:
            break
    return write_sweep(config.out_dir, summaries, config.threshold)


def write_sweep(out_dir: Path, summaries: dict[float, Summary], threshold: float = ATTAINMENT_THRESHOLD,
                load: str = "rate") -> SweepResult:
    """sweep.json and the report over the points' folders (`rate_folder`), which hold their bench outputs.

    `load` names what was swept: "rate" (req/s), or "concurrency" (a population of closed-loop clients).
    """
    best = max_goodput_rate(summaries, threshold)
    result = {
        "threshold": threshold,
        f"max_goodput_{load}": best,
        "max_goodput_rps": summaries[best].goodput_rps if best is not None else None,
        "rates" if load == "rate" else "concurrencies": [
            {load: point, "goodput_rps": s.goodput_rps, "sla_attainment": s.sla_attainment,
             "completed": s.completed, "sent": s.sent} for point, s in summaries.items()],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "sweep.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    report = build_report([rate_folder(out_dir, point, load) for point in summaries], out_dir / "report")
    return SweepResult(summaries, best, result["max_goodput_rps"], report)


def parse_rates(text: str | Sequence[float]) -> tuple[float, ...]:
    """'1,2,4' -> (1.0, 2.0, 4.0); every rate must be positive."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    try:
        rates = tuple(float(p) for p in parts if str(p).strip())
    except ValueError:
        raise ValueError(f"cannot read rates {text!r}; write them like 1,2,4") from None
    if not rates or any(r <= 0 for r in rates):
        raise ValueError(f"rates {text!r} must be positive numbers, like 1,2,4")
    return rates
