"""Synthetic requests: independent prompts with fixed or distributed lengths, Poisson or gamma arrivals.

`shared_prefix` gives every prompt the same leading ids (a system prompt), so
the expected hit rate is shared_prefix / input length.
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from loadgen.hitbins import HitDistribution
from loadgen.lengths import LengthDist, TokenCount
from loadgen.plan import RequestPlan, SingleRequest
from loadgen.tokens import DEFAULT_VOCAB, fresh_tokens


class SyntheticConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["poisson", "gamma"] = "poisson"
    input: LengthDist = Field(LengthDist.model_validate("1K"), description="prompt tokens")
    output: LengthDist = Field(LengthDist.model_validate("128"), description="output tokens")
    rate: float | None = Field(None, gt=0, description="requests per second when the client gets no --rate")
    cv: float = Field(1.0, gt=0, description="gamma only: coefficient of variation of the gaps")
    shared_prefix: TokenCount = Field(0, description="leading tokens common to every prompt")
    requests: int = Field(0, ge=0, description="requests in total; 0 means no limit")
    vocab: int = Field(DEFAULT_VOCAB, ge=2)


class SyntheticWorkload:
    name = "synthetic"
    own_timing = False

    def __init__(self, config: SyntheticConfig, rng: random.Random) -> None:
        self.config = config
        self.arrival_shape = config.kind
        self.arrival_cv = config.cv if config.kind == "gamma" else 1.0
        self.default_rate = config.rate
        self._rng = rng
        self._prefix = fresh_tokens(rng, config.shared_prefix, config.vocab)
        self._count = 0
        self._hits: list[float] = []

    def new_session(self, joining: bool = False) -> SingleRequest | None:  # one request: nothing to cut
        if self.config.requests and self._count >= self.config.requests:
            return None
        length = max(self.config.input.draw(self._rng), len(self._prefix) + 1)
        prompt = self._prefix + fresh_tokens(self._rng, length - len(self._prefix), self.config.vocab)
        # the first request finds nothing cached; later ones reuse the shared prefix
        hit = len(self._prefix) / length if self._count else 0.0
        self._hits.append(hit)
        plan = RequestPlan(f"q{self._count}", prompt, self.config.output.draw(self._rng), hit_rate=hit)
        self._count += 1
        return SingleRequest(plan)

    def hit_distribution(self) -> HitDistribution:
        return HitDistribution.of(self._hits)
