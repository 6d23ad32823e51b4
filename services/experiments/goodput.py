"""Max goodput from a rate sweep: the highest offered rate at which 90% of requests meet the SLA.

Between the highest passing rate r_p (attainment a_p >= 0.9) and the next rate
r_f above it that fails (a_f < 0.9), attainment is taken as linear in the rate,
so the crossing is r_p + (a_p - 0.9) / (a_p - a_f) x (r_f - r_p) (docs/results.md
§Goodput). With no failing rate above r_p the sweep only shows "at least r_p".
"""

from __future__ import annotations

from dataclasses import dataclass

THRESHOLD = 0.9


@dataclass(frozen=True)
class MaxGoodput:
    rate: float | None  # None when no rate passed
    bounded: bool  # False: no rate above it failed, so the true maximum may be higher
    highest_passing: float | None


def max_goodput(attainment_by_rate: dict[float, float], threshold: float = THRESHOLD) -> MaxGoodput:
    rates = sorted(attainment_by_rate)
    passing = [r for r in rates if attainment_by_rate[r] >= threshold]
    if not passing:
        return MaxGoodput(None, True, None)
    best = passing[-1]
    above = [r for r in rates if r > best]
    if not above:
        return MaxGoodput(best, False, best)
    failing = above[0]
    a_p, a_f = attainment_by_rate[best], attainment_by_rate[failing]
    crossing = best + (a_p - threshold) / (a_p - a_f) * (failing - best)
    return MaxGoodput(crossing, True, best)
