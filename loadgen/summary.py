"""summary.json: one run's numbers, computed from its request records alone.

Reports recompute it from requests.jsonl (for another SLA, say), so every
figure here depends only on the records and the run's stated settings. The
formulas are in docs/loadgen.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from loadgen.hitbins import HitDistribution
from loadgen.lengths import Duration
from loadgen.stats import Percentiles, describe


class SlaConfig(BaseModel):
    """A request meets the SLA when TTFT <= ttft_s and TPOT <= tpot_s (docs/loadgen.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ttft_s: Duration = Field(5.0, description="largest acceptable time to first token")
    tpot_s: Duration = Field(0.1, description="largest acceptable time per output token")


class Summary(BaseModel):
    model_config = ConfigDict(frozen=True)

    label: str
    mode: str | None
    workload: str
    offered_rate: float | None
    concurrency: int | None
    sent: int
    completed: int
    failed: int
    cancelled: int
    window_s: float
    ttft_s: Percentiles
    tpot_s: Percentiles
    e2e_s: Percentiles
    itl_s: Percentiles
    throughput_rps: float
    output_tokens_per_s: float
    sla: SlaConfig
    within_sla: int
    goodput_rps: float
    sla_attainment: float
    rld_token_share: float | None
    wan_bytes: int
    pipelines: dict[str, int]
    errors: dict[str, int]
    hit_rate_bins: dict[str, float]
    hit_rate_mean: float
    server_hit_rate_mean: float | None
    skipped_arrivals: int = 0
    interrupted: bool = False
    cost_per_hour: float | None = None
    bcr: float | None = None


def meets_sla(record: dict, sla: SlaConfig) -> bool:
    """Completed, TTFT within the limit, and TPOT within it (a one-token answer has no TPOT)."""
    if record["status"] != "ok" or record["ttft_s"] is None or record["ttft_s"] > sla.ttft_s:
        return False
    return record["tpot_s"] is None or record["tpot_s"] <= sla.tpot_s


def error_kind(record: dict) -> str:
    if record["status"] == "timeout":
        return "timeout"
    return (record.get("error") or "error").split(":", 1)[0]


def _elapsed(record: dict) -> float:
    for key in ("elapsed_s", "e2e_s", "ttft_s"):
        if record.get(key) is not None:
            return record[key]
    return 0.0


def window_seconds(records: Sequence[dict]) -> float:
    """From the start of the run (send_s = 0) to the last response end of any request."""
    if not records:
        return 0.0
    ends = [r["send_s"] + _elapsed(r) for r in records]
    return max(max(ends), 1e-9)


def summarize(
    records: Sequence[dict], *, sla: SlaConfig, workload: str, offered_rate: float | None = None,
    concurrency: int | None = None, label: str | None = None, cost_per_hour: float | None = None,
    skipped_arrivals: int = 0, interrupted: bool = False,
) -> Summary:
    ok = [r for r in records if r["status"] == "ok"]
    cancelled = sum(r["status"] == "cancelled" for r in records)
    counted = [r for r in records if r["status"] != "cancelled"]
    window = window_seconds(records)
    good = sum(meets_sla(r, sla) for r in ok)
    stats = [r["pdd"] for r in ok if r.get("pdd")]
    modes = Counter(s.get("mode") for s in stats if s.get("mode"))
    mode = modes.most_common(1)[0][0] if modes else None
    rld = sum(s.get("rld_tokens") or 0 for s in stats)
    md = sum(s.get("md_tokens") or 0 for s in stats)
    hits = HitDistribution.of(r["hit_rate"] for r in counted)
    server_hits = [max(s.get("prefill_hit_tokens") or 0, s.get("decode_hit_tokens") or 0) / r["prompt_tokens"]
                   for r, s in ((r, r.get("pdd")) for r in ok) if s and r["prompt_tokens"]]
    goodput = good / window if window else 0.0
    return Summary(
        label=label or mode or "run",
        mode=mode,
        workload=workload,
        offered_rate=offered_rate,
        concurrency=concurrency,
        sent=len(records),
        completed=len(ok),
        failed=len(counted) - len(ok),
        cancelled=cancelled,
        window_s=window,
        ttft_s=describe(r["ttft_s"] for r in ok),
        tpot_s=describe(r["tpot_s"] for r in ok),
        e2e_s=describe(r["e2e_s"] for r in ok),
        itl_s=describe(gap for r in ok for gap in r["itl_s"]),
        throughput_rps=len(ok) / window if window else 0.0,
        output_tokens_per_s=sum(r["output_tokens"] for r in ok) / window if window else 0.0,
        sla=sla,
        within_sla=good,
        goodput_rps=goodput,
        sla_attainment=good / len(counted) if counted else 0.0,
        rld_token_share=rld / (rld + md) if rld + md else None,
        wan_bytes=int(sum(s.get("wan_bytes") or 0 for s in stats)),
        pipelines=dict(Counter(s.get("pipeline") or "unknown" for s in stats)),
        errors=dict(Counter(error_kind(r) for r in counted if r["status"] != "ok")),
        hit_rate_bins=hits.as_dict()["bins"],
        hit_rate_mean=hits.mean,
        server_hit_rate_mean=sum(server_hits) / len(server_hits) if server_hits else None,
        skipped_arrivals=skipped_arrivals,
        interrupted=interrupted,
        cost_per_hour=cost_per_hour,
        bcr=goodput / cost_per_hour if cost_per_hour else None,
    )
