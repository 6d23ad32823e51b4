"""How many steps per second the engine loop sustains: its own overhead, with the GPU clock at zero.

256 sequences decode together with a step time of 0, so every microsecond
measured is the emulator's bookkeeping (scheduling, token generation, block
hashing, events). Two cases: events left queued (the engine alone) and one
consumer task per sequence (as the services read them). Results go to
docs/engine.md by hand.

    .venv/bin/python benchmarks/bench_engine.py [--sequences 256] [--steps 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from services.engine.scheduler import Engine, EngineConfig, SequenceHandle
from services.engine.sequence import FinishedEvent, Sequence, TokenEvent

VOCAB = 128_000
PROMPT_TOKENS = 64


def zero_clock(batch) -> float:
    return 0.0


async def drain(handle: SequenceHandle, first_token: asyncio.Event | None) -> None:
    async for event in handle.events():
        if first_token is not None and isinstance(event, TokenEvent):
            first_token.set()
            first_token = None
        if isinstance(event, FinishedEvent):
            return


async def measure(sequences: int, steps: int, consume: bool) -> tuple[float, int]:
    """Seconds per decode step and steps measured, counted from the step after every prefill."""
    capacity = sequences * ((PROMPT_TOKENS + steps + 2) // 16 + 2)
    engine = Engine(EngineConfig(kv_capacity_blocks=capacity, vocab_size=VOCAB, max_running=sequences), zero_clock)
    await engine.start()
    handles = [
        engine.submit(Sequence(f"r{i}", [(i * 31 + j) % VOCAB for j in range(PROMPT_TOKENS)], PROMPT_TOKENS, 0,
                               generate=steps + 1, first_position=0, seed=i))
        for i in range(sequences)
    ]
    # Every prompt fits one step's budget, so all first tokens come from the same step.
    first_token = asyncio.Event()
    readers = [asyncio.create_task(drain(h, first_token if i == 0 else None))
               for i, h in enumerate(handles) if consume or i == len(handles) - 1]
    if not consume:
        readers.append(asyncio.create_task(drain(handles[0], first_token)))
    await first_token.wait()
    steps_before, started = engine.stats().steps, time.perf_counter()
    await asyncio.gather(*readers)
    elapsed = time.perf_counter() - started
    measured = engine.stats().steps - steps_before
    await engine.stop()
    return elapsed / measured, measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sequences", type=int, default=256)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3, help="report the best run: noise only ever adds time")
    args = parser.parse_args()
    for consume, label in ((False, "events queued, not read"), (True, "one reader task per sequence")):
        runs = [asyncio.run(measure(args.sequences, args.steps, consume)) for _ in range(args.repeats)]
        per_step, measured = min(runs)
        print(f"{args.sequences} decoding sequences, zero step time, {label}: "
              f"{1.0 / per_step:,.0f} steps/s, {per_step * 1e6:,.0f} us per step "
              f"({per_step * 1e6 / args.sequences:.2f} us per token; best of {args.repeats} x {measured} steps)")


if __name__ == "__main__":
    main()
