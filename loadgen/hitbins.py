"""Prefix-hit rates in the seven bins PDD reports, and the per-session targets that follow a target mix.

A request's hit rate is the share of its prompt tokens that an unbounded prefix
cache already holds. The bins follow pdd-system.md: most agentic requests land
above 95%, and the few below 90% carry most of the WAN bytes.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import BeforeValidator

# Lower edges of the seven bins; each bin is [edge, next edge), the last ends at 1.0 inclusive.
HIT_BIN_EDGES: tuple[float, ...] = (0.0, 0.90, 0.95, 0.97, 0.98, 0.99, 0.995)
HIT_BIN_LABELS: tuple[str, ...] = ("0-90", "90-95", "95-97", "97-98", "98-99", "99-99.5", "99.5-100")

# Default target: mean about 90%, 75% of requests above 95% (pdd-system.md).
DEFAULT_HIT_WEIGHTS: tuple[float, ...] = (0.12, 0.13, 0.20, 0.15, 0.15, 0.12, 0.13)


def bin_bounds(index: int) -> tuple[float, float]:
    upper = HIT_BIN_EDGES[index + 1] if index + 1 < len(HIT_BIN_EDGES) else 1.0
    return HIT_BIN_EDGES[index], upper


def hit_bin(hit_rate: float) -> int:
    """Index of the bin holding `hit_rate` (a fraction in [0, 1])."""
    if not 0.0 <= hit_rate <= 1.0:
        raise ValueError(f"hit rate {hit_rate!r} is outside 0..1")
    index = 0
    for i, edge in enumerate(HIT_BIN_EDGES):
        if hit_rate >= edge:
            index = i
    return index


def normalise_weights(weights: Sequence[float]) -> tuple[float, ...]:
    if len(weights) != len(HIT_BIN_EDGES):
        raise ValueError(f"need {len(HIT_BIN_EDGES)} bin weights ({'/'.join(HIT_BIN_LABELS)}), got {len(weights)}")
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError("bin weights must be non-negative and not all zero")
    total = float(sum(weights))
    return tuple(w / total for w in weights)


@dataclass(frozen=True)
class HitDistribution:
    """How many requests fell in each bin, their shares and the mean hit rate."""

    counts: tuple[int, ...]
    mean: float

    @classmethod
    def of(cls, hit_rates: Iterable[float]) -> HitDistribution:
        counts = [0] * len(HIT_BIN_EDGES)
        total = 0.0
        for hit in hit_rates:
            counts[hit_bin(hit)] += 1
            total += hit
        n = sum(counts)
        return cls(tuple(counts), total / n if n else 0.0)

    @property
    def requests(self) -> int:
        return sum(self.counts)

    @property
    def shares(self) -> tuple[float, ...]:
        n = self.requests
        return tuple(c / n if n else 0.0 for c in self.counts)

    def share_above(self, hit_rate: float) -> float:
        """Share of requests in bins whose lower edge is at or above `hit_rate`."""
        return sum(s for s, edge in zip(self.shares, HIT_BIN_EDGES) if edge >= hit_rate)

    def as_dict(self) -> dict[str, object]:
        return {
            "requests": self.requests,
            "mean": self.mean,
            "bins": dict(zip(HIT_BIN_LABELS, self.shares)),
            "counts": dict(zip(HIT_BIN_LABELS, self.counts)),
        }


class SessionHitTargets:
    """Target hit rates for the turns of one session, so that whole sessions follow the target mix.

    A session's first turn is always a miss (bin 0-90). Each later turn of a session of T turns
    draws its bin independently, with weight max(0, w_b T - [b is 0-90]) over the T - 1 later
    turns, so a session holds w_b T turns of bin b in expectation, its forced first turn included
    (where w_0 T < 1 the first turn alone exceeds bin 0-90's share, and later turns avoid it).
    Within a bin the value is uniform. The draws come from the session's own generator, so a
    session's targets do not depend on when other sessions send: the same seed gives the same
    prompts whatever order the server answers in (docs/loadgen.md).
    """

    def __init__(self, weights: Sequence[float], turns: int, rng: random.Random) -> None:
        shares = normalise_weights(weights)
        counts = [max(0.0, w * turns - (1.0 if index == 0 else 0.0)) for index, w in enumerate(shares)]
        self.weights = normalise_weights(counts) if sum(counts) > 0 else shares
        self._rng = rng
        self._bins = range(len(self.weights))

    def draw(self) -> float:
        index = self._rng.choices(self._bins, weights=self.weights)[0]
        low, high = bin_bounds(index)
        return self._rng.uniform(low, high)


def parse_hit_weights(value: object) -> tuple[float, ...] | None:
    """The `hits=` value of a spec: seven weights a/b/c/d/e/f/g, "default", or "natural" (no target)."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "default":
            return DEFAULT_HIT_WEIGHTS
        if text in ("natural", "none"):
            return None
        try:
            value = [float(part) for part in text.split("/")]
        except ValueError:
            raise ValueError(
                f"cannot read hits {text!r}; write default, natural, or seven weights "
                f"a/b/c/d/e/f/g for the bins {'/'.join(HIT_BIN_LABELS)}"
            ) from None
    if isinstance(value, (list, tuple)):
        return normalise_weights([float(v) for v in value])
    raise ValueError(f"cannot read hits {value!r}")


HitWeights = Annotated[tuple[float, ...] | None, BeforeValidator(parse_hit_weights)]
