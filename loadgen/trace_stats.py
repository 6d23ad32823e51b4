"""Mooncake-format traces: reading them, and the prefix reuse an unbounded cache would get.

A trace line is {"timestamp": ms, "input_length", "output_length", "hash_ids"},
one hash id per block of `block_size` tokens, the last block possibly partial.
A request reuses the longest run of leading ids already seen (docs/loadgen.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DEFAULT_BLOCK_SIZE = 512  # Mooncake's published traces use 512-token blocks


@dataclass(frozen=True)
class TraceRequest:
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def read_trace(path: str | Path, limit: int | None = None) -> Iterator[TraceRequest]:
    """Yield the first `limit` requests of a JSONL trace; a bad line names its line number."""
    with open(path, encoding="utf-8") as lines:
        count = 0
        for number, line in enumerate(lines, start=1):
            if limit is not None and count >= limit:
                return
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                request = TraceRequest(
                    float(row["timestamp"]), int(row["input_length"]), int(row["output_length"]),
                    tuple(int(i) for i in row["hash_ids"]),
                )
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(f"{path}:{number}: not a Mooncake trace line ({error})") from None
            count += 1
            yield request


class PrefixReuse:
    """Tracks which block ids an unbounded prefix cache holds; tells each request's reuse."""

    def __init__(self, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        self.block_size = block_size
        self._seen: set[int] = set()

    def add(self, request: TraceRequest) -> tuple[int, int]:
        """(reused blocks, reused tokens) for `request`, then cache its blocks."""
        blocks = 0
        for hash_id in request.hash_ids:
            if hash_id not in self._seen:
                break
            blocks += 1
        self._seen.update(request.hash_ids)
        # a reused partial last block counts at its real length
        return blocks, min(blocks * self.block_size, request.input_length)


@dataclass(frozen=True)
class TraceStats:
    requests: int
    duration_s: float
    input_length: dict[str, float]
    output_length: dict[str, float]
    block_reuse: float
    token_reuse: float

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def length_summary(values: list[int]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p90": 0.0, "p99": 0.0, "mean": 0.0}
    array = np.asarray(values, dtype=float)
    p50, p90, p99 = np.percentile(array, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "mean": float(array.mean())}


def trace_stats(path: str | Path, limit: int | None = None, block_size: int = DEFAULT_BLOCK_SIZE) -> TraceStats:
    reuse = PrefixReuse(block_size)
    inputs: list[int] = []
    outputs: list[int] = []
    timestamps: list[float] = []
    reused_blocks = total_blocks = reused_tokens = 0
    for request in read_trace(path, limit):
        blocks, tokens = reuse.add(request)
        reused_blocks += blocks
        reused_tokens += tokens
        total_blocks += len(request.hash_ids)
        inputs.append(request.input_length)
        outputs.append(request.output_length)
        timestamps.append(request.timestamp_ms)
    total_tokens = sum(inputs)
    return TraceStats(
        requests=len(inputs),
        duration_s=(max(timestamps) - min(timestamps)) / 1000.0 if timestamps else 0.0,
        input_length=length_summary(inputs),
        output_length=length_summary(outputs),
        block_reuse=reused_blocks / total_blocks if total_blocks else 0.0,
        token_reuse=reused_tokens / total_tokens if total_tokens else 0.0,
    )
