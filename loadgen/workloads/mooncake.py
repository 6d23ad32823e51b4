"""Replay of a Mooncake-format trace: each hash id expands to the same 512 token ids every time.

Shared leading hash ids therefore become shared token-id prefixes, and the
server's cache sees the reuse the trace recorded. Timestamps are divided by
`speed`; `limit` caps the number of requests.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from loadgen.hitbins import HitDistribution
from loadgen.plan import RequestPlan, SingleRequest
from loadgen.tokens import DEFAULT_VOCAB, expand_hash_ids
from loadgen.trace_stats import DEFAULT_BLOCK_SIZE, PrefixReuse, TraceRequest, read_trace


class MooncakeConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["mooncake"] = "mooncake"
    file: Path
    speed: float = Field(1.0, gt=0, description="replay this many times faster than recorded")
    limit: int | None = Field(None, ge=1, description="replay at most this many requests")
    skip: int = Field(0, ge=0, description="start after this many requests")
    block_size: int = Field(DEFAULT_BLOCK_SIZE, ge=1)
    max_output: int | None = Field(None, ge=1, description="cap each request's output length")
    vocab: int = Field(DEFAULT_VOCAB, ge=2)
    token_seed: int = Field(0, description="seed of the hash-id to token-id expansion")


class MooncakeWorkload:
    name = "mooncake"
    own_timing = True
    arrival_shape = "poisson"
    arrival_cv = 1.0
    default_rate = None

    def __init__(self, config: MooncakeConfig, rng: random.Random | None = None) -> None:
        # token ids come from token_seed alone so every run of a trace sends the same prompts
        if not config.file.is_file():
            raise ValueError(f"trace file {str(config.file)!r} does not exist")
        self.config = config
        self._rows = self._read()
        self._reuse = PrefixReuse(config.block_size)
        self._index = 0
        self._start_ms: float | None = None
        self._hits: list[float] = []

    def _read(self):
        limit = None if self.config.limit is None else self.config.skip + self.config.limit
        rows = read_trace(self.config.file, limit)
        for _ in range(self.config.skip):
            next(rows, None)
        return rows

    def new_session(self, joining: bool = False) -> SingleRequest | None:  # one request: nothing to cut
        row: TraceRequest | None = next(self._rows, None)
        if row is None:
            return None
        if self._start_ms is None:
            self._start_ms = row.timestamp_ms
        cfg = self.config
        prompt = expand_hash_ids(list(row.hash_ids), row.input_length, cfg.block_size, cfg.vocab, cfg.token_seed)
        _, reused_tokens = self._reuse.add(row)
        hit = reused_tokens / row.input_length if row.input_length else 0.0
        self._hits.append(hit)
        output = row.output_length if cfg.max_output is None else min(row.output_length, cfg.max_output)
        plan = RequestPlan(
            request_id=f"r{cfg.skip + self._index}",
            prompt=prompt,
            max_tokens=max(1, output),
            hit_rate=hit,
            at_s=(row.timestamp_ms - self._start_ms) / 1000.0 / cfg.speed,
        )
        self._index += 1
        return SingleRequest(plan)

    def hit_distribution(self) -> HitDistribution:
        return HitDistribution.of(self._hits)
