"""What the live page plots from the router's own counters: rates, shares and percentiles over a window.

Pure functions of numbers the router keeps anyway: its /stats counters, its Prometheus metrics
(services/router/metrics.py) and the TTFT and TPOT of its last finished requests. Percentiles are
numpy's default, linear between order statistics, and an answer is within the SLA when its TTFT is at
most `sla.ttft_s` and its TPOT (if it has one) at most `sla.tpot_s`, as the reports count them
(docs/loadgen.md §Summary). The formulas are in docs/dashboard.md.
"""

from __future__ import annotations

from collections.abc import Reversible
from dataclasses import dataclass, field
from itertools import takewhile
from typing import Any

import numpy as np

from services.scenario.model import SlaSpec

QUANTILES = (50, 90, 99)


@dataclass(frozen=True)
class Totals:
    """The router's cumulative counts at one moment."""

    completed: int = 0
    errors: float = 0.0  # answers with an error status, refused or failed; not the clients' own hang-ups
    rld_tokens: float = 0.0
    md_tokens: float = 0.0
    pipelines: dict[str, float] = field(default_factory=dict)
    degraded: dict[str, float] = field(default_factory=dict)


def counter_by(counter: Any, label: str) -> dict[str, float]:
    """A labelled prometheus_client Counter's values, by one of its labels (summed over the others)."""
    values: dict[str, float] = {}
    for family in counter.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                key = sample.labels[label]
                values[key] = values.get(key, 0.0) + sample.value
    return values


def counter_value(counter: Any) -> float:
    """An unlabelled prometheus_client Counter's value."""
    return sum(s.value for family in counter.collect() for s in family.samples if s.name.endswith("_total"))


def router_totals(router: Any) -> Totals:
    """Totals of a services.router.server.Router: what /stats and /metrics show, read in memory."""
    metrics = router.metrics
    errors = counter_by(metrics.errors, "status")
    errors.pop("client_closed", None)  # a hang-up is the client's doing, not the mesh's
    return Totals(completed=router.completed, errors=sum(errors.values()),
                  rld_tokens=counter_value(metrics.rld_tokens), md_tokens=counter_value(metrics.md_tokens),
                  pipelines=counter_by(metrics.pipelines, "pipeline"), degraded=counter_by(metrics.degraded, "kind"))


def rates(now: Totals, then: Totals, elapsed_s: float) -> dict[str, Any]:
    """Per second over `elapsed_s`, and the relay's share of the output tokens made in it."""
    relay = now.rld_tokens - then.rld_tokens
    made = relay + now.md_tokens - then.md_tokens
    return {
        "rps": (now.completed - then.completed) / elapsed_s,
        "errors_ps": (now.errors - then.errors) / elapsed_s,
        "rld_share": relay / made if made > 0 else None,
        "pipelines": {name: count - then.pipelines.get(name, 0.0) for name, count in now.pipelines.items()},
    }


def degraded_since(now: Totals, before: Totals) -> str | None:
    """'3 answers degraded since the last sample: 2 main-decode-failed, 1 prefill-unreachable', or None."""
    grown = {kind: count - before.degraded.get(kind, 0.0) for kind, count in sorted(now.degraded.items())}
    grown = {kind: n for kind, n in grown.items() if n > 0}
    if not grown:
        return None
    parts = ", ".join(f"{n:g} {kind}" for kind, n in grown.items())
    total = sum(grown.values())
    return f"{total:g} answer{'s' if total != 1 else ''} degraded since the last sample: {parts}"


def quantiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {f"p{q}": float(v) for q, v in zip(QUANTILES, np.percentile(np.asarray(values), QUANTILES))}


def latency(recent: Reversible[tuple[float, float, float | None]], since: float, sla: SlaSpec) -> dict[str, Any]:
    """TTFT and TPOT percentiles of the requests that finished after `since` (monotonic), and how many met the SLA.

    `recent` holds (finished at, TTFT, TPOT or None for a one-token answer), oldest first.
    """
    # Newest first, stopping at the window's start: a tick reads only the requests of its window.
    window = [(ttft, tpot) for _, ttft, tpot in takewhile(lambda r: r[0] > since, reversed(recent))]
    met = sum(1 for ttft, tpot in window if ttft <= sla.ttft_s and (tpot is None or tpot <= sla.tpot_s))
    return {
        "requests": len(window),
        "ttft": quantiles([ttft for ttft, _ in window]),
        "tpot": quantiles([tpot for _, tpot in window if tpot is not None]),
        "sla_met": met / len(window) if window else None,
    }


def figures(now: Totals, then: Totals, recent: Reversible[tuple[float, float, float | None]], since: float,
            elapsed_s: float, sla: SlaSpec) -> dict[str, Any]:
    """Rates and latencies over one window, and SLA goodput: requests per second times the share of the
    window's answers that met the SLA (each answer of a request that asked for n is judged alone)."""
    window = {**rates(now, then, elapsed_s), **latency(recent, since, sla)}
    window["goodput"] = window["rps"] * window["sla_met"] if window["sla_met"] is not None else 0.0
    return window
