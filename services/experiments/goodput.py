"""Max goodput from a load sweep: the most requests per second served while 90% of requests meet the SLA.

Each step of the sweep has a load x (agents), an attainment a (share of its
requests within SLA) and a goodput g (requests within SLA per second). Between
the highest passing step p (a_p >= 0.9) and the next step f above it that fails
(a_f < 0.9), a and g are taken as linear in x, so the crossing is at
x* = x_p + (a_p - 0.9) / (a_p - a_f) (x_f - x_p) and the max goodput is g there
(docs/experiments.md §Goodput). With no failing step above p, g_p is only a lower
bound.
"""

from __future__ import annotations

from dataclasses import dataclass

THRESHOLD = 0.9


@dataclass(frozen=True)
class LoadPoint:
    load: float
    attainment: float
    goodput_rps: float


@dataclass(frozen=True)
class MaxGoodput:
    goodput_rps: float | None  # None when no step passed
    load: float | None  # where the 90% crossing lies
    bounded: bool  # False: no step above it failed, so the true maximum may be higher
    highest_passing: float | None


def max_goodput(points: list[LoadPoint], threshold: float = THRESHOLD) -> MaxGoodput:
    ordered = sorted(points, key=lambda p: p.load)
    passing = [p for p in ordered if p.attainment >= threshold]
    if not passing:
        return MaxGoodput(None, None, True, None)
    best = passing[-1]
    above = [p for p in ordered if p.load > best.load]
    if not above:
        return MaxGoodput(best.goodput_rps, best.load, False, best.load)
    fail = above[0]
    share = (best.attainment - threshold) / (best.attainment - fail.attainment)
    goodput = best.goodput_rps + share * (fail.goodput_rps - best.goodput_rps)
    return MaxGoodput(max(goodput, best.goodput_rps), best.load + share * (fail.load - best.load), True, best.load)
