"""The fault-free baseline, and when the mesh is back to it after a fault.

Traffic is open loop, so the mesh serves its fault-free throughput exactly when
every request sent keeps up: it completes with the fault-free text, and its
first token comes within the baseline's bound

    ttft_bound = max(2 x baseline TTFT p99, baseline TTFT p99 + 1 s).

The recovery point of a fault is the send time of the first request after the
fault's end from which on every request was healthy (the start of the longest
healthy run that reaches the end of the observation); recovery_s is that point
minus the fault's end. A request still in flight counts as healthy once its
first token has come, and only until it is older than the bound. One still
waiting for its first token is undecided and ends the run: a recovery judged
while it waits could be undone by it (a KV transfer queued behind a fault's
backlog shows its first token seconds later).
"""

from __future__ import annotations

from dataclasses import dataclass

from services.chaos.outcomes import Outcome, percentile

MIN_HEALTHY_RUN = 6  # requests: a single lucky one does not make a recovery


@dataclass(frozen=True)
class Baseline:
    requests: int
    throughput_rps: float
    ttft_p50_s: float
    ttft_p99_s: float

    @property
    def ttft_bound_s(self) -> float:
        return max(2 * self.ttft_p99_s, self.ttft_p99_s + 1.0)

    @classmethod
    def of(cls, outcomes: list[Outcome], start_s: float, end_s: float) -> Baseline | None:
        sent = [o for o in outcomes if start_s <= o.send_s < end_s]
        ttfts = [o.ttft_s for o in sent if o.kind == "completed" and o.streamed and o.ttft_s is not None]
        if not ttfts:
            return None
        completed = sum(1 for o in sent if o.kind == "completed")
        return cls(len(sent), completed / (end_s - start_s), percentile(ttfts, 0.5), percentile(ttfts, 0.99))


def healthy_run_start(outcomes: list[Outcome], after_s: float, before_s: float, bound_s: float,
                      now_s: float, ended_by_s: float = float("inf")) -> tuple[float | None, int]:
    """(send time where the healthy run starts, its length) among requests sent in [after_s, before_s).

    With `ended_by_s` (the next fault's start) only requests that had ended by then count: one still in
    flight when the next fault struck tells about that fault, not about this one's recovery.
    """
    window = sorted((o for o in outcomes if after_s <= o.send_s < before_s and o.end_s <= ended_by_s),
                    key=lambda o: o.send_s)
    start, length = None, 0
    for outcome in reversed(window):
        ok = outcome.healthy(bound_s) if outcome.done else \
            outcome.ttft_s is not None and now_s - outcome.send_s <= bound_s
        if not ok:
            break
        start, length = outcome.send_s, length + 1
    return start, length


def recovered_at(outcomes: list[Outcome], fault_end_s: float, before_s: float, bound_s: float,
                 now_s: float, confirm_s: float) -> float | None:
    """The recovery point once the healthy run is long enough and has lasted `confirm_s`; else None."""
    start, length = healthy_run_start(outcomes, fault_end_s, before_s, bound_s, now_s)
    if start is None or length < MIN_HEALTHY_RUN or min(now_s, before_s) - start < confirm_s:
        return None
    return start


def ttft_p99(outcomes: list[Outcome], start_s: float, end_s: float) -> float | None:
    """TTFT P99 of the streamed requests sent while the fault lasted that completed."""
    return percentile([o.ttft_s for o in outcomes if start_s <= o.send_s < end_s and o.kind == "completed"
                       and o.streamed and o.ttft_s is not None], 0.99)
