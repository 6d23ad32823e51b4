"""Percentiles as every report computes them: linear interpolation between order statistics.

For sorted values x_0..x_{n-1}, the p-quantile sits at rank h = (n - 1) p and
is x_floor(h) + (h - floor(h)) (x_ceil(h) - x_floor(h)) (numpy's default,
Hyndman-Fan type 7; docs/loadgen.md).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from pydantic import BaseModel, ConfigDict


class Percentiles(BaseModel):
    model_config = ConfigDict(frozen=True)

    count: int = 0
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    mean: float | None = None
    max: float | None = None


def percentile(values: Iterable[float], q: float) -> float | None:
    """The q-quantile (q in [0, 1]) of the values, or None when there are none."""
    array = np.asarray([v for v in values if v is not None], dtype=float)
    if array.size == 0:
        return None
    return float(np.percentile(array, q * 100.0))


def describe(values: Iterable[float | None]) -> Percentiles:
    array = np.asarray([v for v in values if v is not None], dtype=float)
    if array.size == 0:
        return Percentiles()
    p50, p90, p99 = np.percentile(array, [50, 90, 99])
    return Percentiles(
        count=int(array.size), p50=float(p50), p90=float(p90), p99=float(p99),
        mean=float(array.mean()), max=float(array.max()),
    )
