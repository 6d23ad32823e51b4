"""One measured window as a PointResult: the client's summary and the engines' counters over the window.

Both backends (meshpoint.py, simpoint.py) make a point with `measured_point`:
the bench summary of the requests sent in the window, and the changes of every
engine's /stats counters between the window's first and last snapshot
(docs/economics.md).
"""

from __future__ import annotations

from pathlib import Path

from loadgen.summary import SlaConfig
from services.experiments.economics.loadpoint import PointResult, PointStats, Quantiles
from services.experiments.population import Window
from services.experiments.steady import StepResult, write_window
from services.scenario import Scenario
from services.scenario.cost import cost_per_hour
from services.types import Role

Snapshot = tuple[float, dict[str, dict]]  # (seconds since the run began, stats per service)


def _engines(snapshot: dict[str, dict], *roles: Role) -> list[dict]:
    values = {r.value for r in roles}
    return [e for stats in snapshot.values() if stats.get("role") in values for e in stats["instances"].values()]


def _delta(first: dict, last: dict, roles: tuple[Role, ...], key: str) -> float:
    return sum(e[key] for e in _engines(last, *roles)) - sum(e[key] for e in _engines(first, *roles))


def window_stats(window: list[Snapshot], scenario: Scenario) -> dict:
    """Engine-side validity inputs over a window of snapshots; {} with fewer than two."""
    if len(window) < 2:
        return {}
    (t0, first), (t1, last) = window[0], window[-1]
    prefill, decode, relay = (Role.PREFILL,), (Role.DECODE, Role.MAIN_DECODE), (Role.RELAY_DECODE,)
    instances = len(_engines(last, *prefill))
    queried = _delta(first, last, prefill, "prefix_cache_query_tokens")
    hit = sum(_delta(first, last, prefill, key) for key in ("prefix_cache_hit_tokens", "host_cache_hit_tokens"))
    steps = _delta(first, last, decode, "steps")
    usage = [sum(e["kv_blocks_used"] for e in _engines(s, *decode)) / max(1, sum(e["kv_blocks_total"] for e in
             _engines(s, *decode))) for _, s in window]
    has_relay = bool(scenario.pools_with(Role.RELAY_DECODE))
    return {
        "prefill_busy": _delta(first, last, prefill, "busy_seconds") / ((t1 - t0) * instances) if instances else None,
        "prefill_hit": hit / queried if queried else None,
        "md_batch_mean": _delta(first, last, decode, "decode_tokens") / steps if steps else None,
        "md_kv_usage": max(usage),
        "rld_queue_max": max(sum(e["waiting"] for e in _engines(s, *relay)) for _, s in window) if has_relay
        else None,
    }


def wan_utilisation(scenario: Scenario, step: StepResult) -> float | None:
    """Emulated WAN bytes of the window's requests against what the line could carry in it; None without a WAN."""
    if all(p.dc == scenario.pools[0].dc for p in scenario.pools):
        return None
    return step.wan_utilisation(scenario.wan.rate_bps)


def point_of(scenario: Scenario, step: StepResult, seed: int, window: list[Snapshot], records: list[dict]
             ) -> PointResult:
    s = step.summary
    stats = PointStats(planned_hit=s.hit_rate_mean, wan_utilisation=wan_utilisation(scenario, step),
                       rld_token_share=s.rld_token_share, pipelines=dict(s.pipelines),
                       **window_stats(window, scenario))
    ttfts = tuple(r["ttft_s"] for r in records if r.get("ttft_s") is not None)
    return PointResult(step.window.users, seed, s.sent, s.sla_attainment, step.goodput_rps, step.request_rate,
                       _q(s.ttft_s), _q(s.tpot_s), _q(s.e2e_s), stats, ttfts)


def measured_point(scenario: Scenario, workload: str, seed: int, records: list[dict], snapshots: list[Snapshot],
                   window: Window, out_dir: Path) -> PointResult:
    """The point a run makes over `window`: its bench outputs written to `out_dir`, the snapshots within it."""
    sla = SlaConfig(ttft_s=scenario.sla.ttft_s, tpot_s=scenario.sla.tpot_s)
    step = write_window(records, window, out_dir, sla, scenario.name, workload, cost_per_hour(scenario))
    within = [snap for snap in snapshots if window.start_s <= snap[0] <= window.end_s]
    kept = [r for r in records if window.start_s <= r["send_s"] < window.end_s]
    return point_of(scenario, step, seed, within, kept)


def _q(p) -> Quantiles:
    return Quantiles(p.p50, p.p90, p.p99)
