"""Token counts and length distributions as written in workload specs.

"64K" is 65536 tokens (binary K, as context windows are quoted); a length
distribution is "200" (fixed), "100..400" (uniform integers, both ends included)
or "exp200" (exponential with mean 200, at least 1, at most 8x the mean).
"""

from __future__ import annotations

import random
import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator

from services.units import parse_duration, parse_size


def parse_tokens(text: str | int | float) -> int:
    """'64K' -> 65536, '1000' -> 1000; refuses negatives and fractions."""
    if isinstance(text, bool):
        raise ValueError(f"cannot read token count {text!r}")
    if isinstance(text, float) and not text.is_integer():
        raise ValueError(f"token count {text!r} is not a whole number")
    try:
        value = parse_size(text) if isinstance(text, str) else int(text)
    except ValueError:
        raise ValueError(f"cannot read token count {text!r}; write 4096 or 64K") from None
    if value < 0:
        raise ValueError(f"token count {text!r} is negative")
    return value


def _duration(text: str | int | float) -> float:
    value = parse_duration(text)
    if value < 0:
        raise ValueError(f"duration {text!r} is negative")
    return value


TokenCount = Annotated[int, BeforeValidator(parse_tokens)]
Duration = Annotated[float, BeforeValidator(_duration)]


class LengthDist(BaseModel):
    """A distribution of token counts: fixed, uniform or exponential."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["fixed", "uniform", "exp"]
    low: int
    high: int

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: object) -> object:
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            return _parse_length(str(value))
        return value

    @model_validator(mode="after")
    def _check(self) -> LengthDist:
        if self.low < 1 or self.high < self.low:
            raise ValueError(f"length range {self.low}..{self.high} must satisfy 1 <= low <= high")
        return self

    @property
    def mean(self) -> float:
        return self.low if self.kind == "exp" else (self.low + self.high) / 2

    @property
    def maximum(self) -> int:
        return self.high

    def draw(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            return self.low
        if self.kind == "uniform":
            return rng.randint(self.low, self.high)
        return max(1, min(self.high, round(rng.expovariate(1.0 / self.low))))

    def residual(self, rng: random.Random) -> int:
        """What is left of a length in progress at a random moment: P(R = r) = P(L >= r) / E[L], renewal
        theory's equilibrium distribution (docs/loadgen.md, "Users joining"). A length-biased draw (L kept
        with probability L / maximum), then a uniform point of it."""
        while True:
            length = self.draw(rng)
            if rng.random() * self.maximum < length:
                return rng.randint(1, length)

    def __str__(self) -> str:
        if self.kind == "fixed":
            return str(self.low)
        return f"{self.low}..{self.high}" if self.kind == "uniform" else f"exp{self.low}"


def _parse_length(text: str) -> dict[str, object]:
    text = text.strip()
    if match := re.fullmatch(r"exp(.+)", text):
        mean = parse_tokens(match[1])
        return {"kind": "exp", "low": mean, "high": 8 * mean}
    if ".." in text:
        low, high = text.split("..", 1)
        return {"kind": "uniform", "low": parse_tokens(low), "high": parse_tokens(high)}
    try:
        value = parse_tokens(text)
    except ValueError:
        raise ValueError(f"cannot read length {text!r}; write 200, 100..400 or exp200") from None
    return {"kind": "fixed", "low": value, "high": value}
