"""Jitter draws as tc netem makes them: a correlated uniform, mapped through a quantile.

netem draws u from a uniform source blended with the previous draw,
`u_n = (1 - rho) * r_n + rho * u_(n-1)`, then looks u up in an inverse-CDF table
scaled by sigma. We compute the same quantile functions in closed form
(docs/netem.md, "Jitter"), clipped to the +-4 sigma range the 16-bit tables hold:

- uniform:      q(u) = 2u - 1                                  (in [-1, 1))
- normal:       q(u) = Phi^-1(u)
- pareto:       q(u) = 4/3 * ((1 - u)^(-1/3) - 1.5)            (a = 3, mean 0)
- paretonormal: q(u) = 0.25 * Phi^-1(u) + 0.75 * pareto(u)
"""

from __future__ import annotations

import random
from statistics import NormalDist

import numpy as np

from netem.config import JitterDist

TABLE_MAX = 32767 / 8192  # the largest value netem's int16 tables (scale 8192) can hold
TABLE_MIN = -4.0
PARETO_A = 3.0
_U_FLOOR = 1e-12  # keeps Phi^-1 and the pareto power finite at u = 0 or 1
_STANDARD_NORMAL = NormalDist()


def _pareto(u: float) -> float:
    return (4.0 / 3.0) * ((1.0 - u) ** (-1.0 / PARETO_A) - 1.5)


def quantile(dist: JitterDist, u: float) -> float:
    """Jitter in units of sigma for a uniform draw u in [0, 1)."""
    if dist == "uniform":
        return 2.0 * u - 1.0
    u = min(max(u, _U_FLOOR), 1.0 - _U_FLOOR)
    if dist == "normal":
        x = _STANDARD_NORMAL.inv_cdf(u)
    elif dist == "pareto":
        x = _pareto(u)
    elif dist == "paretonormal":
        x = 0.25 * _STANDARD_NORMAL.inv_cdf(u) + 0.75 * _pareto(u)
    else:
        raise ValueError(f"unknown jitter distribution {dist!r}")
    return min(max(x, TABLE_MIN), TABLE_MAX)


class StandardCdf:
    """The CDF of quantile(dist, U) for U uniform, to test draws against (KS tests).

    Built by inverting the monotone quantile on a fine grid of u; takes floats or arrays.
    """

    def __init__(self, dist: JitterDist, points: int = 200_001) -> None:
        self._u = np.linspace(0.0, 1.0, points)
        self._x = np.array([quantile(dist, u) for u in self._u])

    def __call__(self, x: float | np.ndarray) -> float | np.ndarray:
        return np.interp(x, self._x, self._u, left=0.0, right=1.0)


class JitterSource:
    """Seeded, correlated jitter in seconds. One per direction, as netem keeps one per qdisc."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._last_u = rng.random()
        self.dist: JitterDist = "uniform"
        self.sigma = 0.0
        self.rho = 0.0

    def configure(self, dist: JitterDist, sigma: float, rho: float) -> None:
        self.dist, self.sigma, self.rho = dist, sigma, rho

    def sample(self) -> float:
        if self.sigma == 0.0:
            return 0.0
        u = self._rng.random()
        if self.rho:
            u = (1.0 - self.rho) * u + self.rho * self._last_u
        self._last_u = u
        return self.sigma * quantile(self.dist, u)
