"""The checks reported at every knee: does the point measure the deployment, or an artefact of the setup?

Each check gives a named verdict: ok True (the bar holds), False (the run
says what bound it), or None (the deployment has no such part, or the backend
did not report it). Bars (docs/economics.md):

- prefill busy under 70%: above it the prefill tier, shared by every
  deployment, sets the knee ("prefill bound"), the artefact of the old setup;
- the prefill hit within 5 points of the workload's plan: otherwise the cache,
  not the mix the report states, sets the load (assumed bar: the hit bins'
  width around the 90% mean);
- (main) decode KV usage under 95%: above it admission, not compute, limits
  the batch (vLLM and SGLang preempt near a full pool);
- WAN utilisation under 95%: above it the line, not the deployment, queues;
- relay queue at most 8 waiting and its token share under 50%: the relay is a
  bridge, not a second decode tier (the report's share is 6.2%; 8 is assumed,
  one full step's worth of admissions);
- singular share under 10%: singular traffic is "rare" in the report
  (docs/pdd-system.md); pdd-mini sees 3-4% (docs/reliability.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from services.experiments.economics.loadpoint import PointStats

PREFILL_BUSY_MAX = 0.70
HIT_GAP_MAX = 0.05
KV_USAGE_MAX = 0.95
WAN_UTILISATION_MAX = 0.95
RLD_QUEUE_MAX = 8
RLD_SHARE_MAX = 0.5
SINGULAR_SHARE_MAX = 0.10


@dataclass(frozen=True)
class Verdict:
    name: str
    ok: bool | None
    value: str  # what was measured, as the report prints it
    says: str  # what the run says when the bar fails

    def line(self) -> str:
        mark = {True: "ok", False: self.says, None: "n/a"}[self.ok]
        return f"{self.name}: {self.value} ({mark})"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _bar(value: float | None, limit: float) -> bool | None:
    return None if value is None else value < limit


def verdicts(stats: PointStats) -> list[Verdict]:
    hit_gap = None if stats.prefill_hit is None or stats.planned_hit is None \
        else abs(stats.prefill_hit - stats.planned_hit)
    relay = None if stats.rld_queue_max is None and stats.rld_token_share is None else \
        (stats.rld_queue_max or 0) <= RLD_QUEUE_MAX and (stats.rld_token_share or 0) < RLD_SHARE_MAX
    return [
        Verdict("prefill busy", _bar(stats.prefill_busy, PREFILL_BUSY_MAX), _pct(stats.prefill_busy), "prefill bound"),
        Verdict("prefill hit vs plan", _bar(hit_gap, HIT_GAP_MAX + 1e-12),
                f"{_pct(stats.prefill_hit)} against {_pct(stats.planned_hit)}", "cache off the workload's plan"),
        Verdict("MD batch and KV", _bar(stats.md_kv_usage, KV_USAGE_MAX),
                f"batch {'-' if stats.md_batch_mean is None else f'{stats.md_batch_mean:.1f}'}, "
                f"KV {_pct(stats.md_kv_usage)}", "decode KV bound"),
        Verdict("WAN utilisation", _bar(stats.wan_utilisation, WAN_UTILISATION_MAX), _pct(stats.wan_utilisation),
                "line bound"),
        Verdict("RLD queue and share", relay,
                f"queue {'-' if stats.rld_queue_max is None else stats.rld_queue_max}, "
                f"share {_pct(stats.rld_token_share)}", "relay overloaded"),
        Verdict("singular share", _bar(stats.singular_share, SINGULAR_SHARE_MAX), _pct(stats.singular_share),
                "singular traffic is not rare"),
    ]


def failed(stats: PointStats) -> list[str]:
    """What bound the point: the `says` of every failed check."""
    return [v.says for v in verdicts(stats) if v.ok is False]
