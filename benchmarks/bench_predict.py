"""How long RooflineClock.step_seconds takes per call: it runs once per emulated engine step.

    .venv/bin/python benchmarks/bench_predict.py

Prints microseconds per call for typical batches. Steps repeat the same token
and sequence counts (the clock memoises that part) while contexts change, as
they do in a running engine; the "cold" line defeats the memo on purpose.
"""

from __future__ import annotations

import random
import time

from services.engine.batch import Chunk, StepBatch
from services.engine.roofline import RooflineClock

CALLS = 20_000


def _per_call_us(clock: RooflineClock, batches: list[StepBatch]) -> float:
    step = clock.step_seconds
    start = time.perf_counter()
    for batch in batches:
        step(batch)
    return (time.perf_counter() - start) / len(batches) * 1e6


def _decodes(rng: random.Random, count: int) -> tuple[int, ...]:
    return tuple(rng.randint(512, 32768) for _ in range(count))


def main() -> None:
    rng = random.Random(7)
    cases = {
        "llama3-8b  1 chunk + 64 decodes": (
            RooflineClock.for_names("h200-sxm", "llama3-8b"),
            [StepBatch(chunks=(Chunk(512, rng.randint(0, 8192)),), decode_contexts=_decodes(rng, 64))
             for _ in range(CALLS)],
        ),
        "llama3-8b  256 decodes": (
            RooflineClock.for_names("h200-sxm", "llama3-8b"),
            [StepBatch(decode_contexts=_decodes(rng, 256)) for _ in range(CALLS)],
        ),
        "deepseek-v3 tp8 1 chunk + 64 decodes": (
            RooflineClock.for_names("h200-sxm", "deepseek-v3", tp=8),
            [StepBatch(chunks=(Chunk(2048, 4096),), decode_contexts=_decodes(rng, 64)) for _ in range(CALLS)],
        ),
        "llama3-8b  cold: new token count every call": (
            RooflineClock.for_names("h200-sxm", "llama3-8b"),
            [StepBatch(chunks=(Chunk(1 + i),), decode_contexts=_decodes(rng, 64)) for i in range(CALLS // 10)],
        ),
        "deepseek-v3 tp8 cold: new token count every call": (
            RooflineClock.for_names("h200-sxm", "deepseek-v3", tp=8),
            [StepBatch(chunks=(Chunk(1 + i),), decode_contexts=_decodes(rng, 64)) for i in range(CALLS // 10)],
        ),
    }
    for name, (clock, batches) in cases.items():
        _per_call_us(clock, batches[:100])  # warm the memo and the interpreter
        print(f"{name:50s} {_per_call_us(clock, batches):7.2f} us per step_seconds call")


if __name__ == "__main__":
    main()
