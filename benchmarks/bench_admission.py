"""What KV admission does to concurrency: a burst of requests on one small instance, planner-driven.

    python -m benchmarks.bench_admission

64 requests (4096-token prompts and 256 output tokens by default) arrive together at one llama3-8b H100
instance with room for 16 of them at full length. The planner runs step by step on the
roofline clock (emulated time, no sleeping). Printed: emulated seconds to finish all, mean
running sequences per decode step, preemptions. Runs against any version of the engine that
has StepPlanner and EngineConfig (docs/engine.md, "Admission": before and after).
"""

from __future__ import annotations

import argparse

from services.engine.prefix_cache import PrefixCache
from services.engine.roofline import RooflineClock
from services.engine.sequence import Sequence, SequenceState, Status
from services.engine.step_planner import EngineConfig, StepPlanner

REQUESTS = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", type=int, default=4096)
    parser.add_argument("--output", type=int, default=256)
    args = parser.parse_args()
    PROMPT, OUTPUT = args.prompt, args.output  # noqa: N806 (read as the constants of one run)
    clock = RooflineClock.for_names("h100-sxm", "llama3-8b")
    blocks = 16 * -(-(PROMPT + OUTPUT - 1) // 16)  # 16 requests at full length
    config = EngineConfig(kv_capacity_blocks=blocks, vocab_size=128256, max_running=256)
    planner = StepPlanner(config, PrefixCache(config.kv_capacity_blocks, config.block_size))
    states = []
    for i in range(REQUESTS):
        ids = [(j * 7919 + i * 104729) % 128000 for j in range(PROMPT)]
        state = SequenceState(Sequence(f"r{i}", ids, PROMPT, 0, OUTPUT, 0, seed=i), 16, 128256, 0.0)
        planner.enqueue(state)
        states.append(state)
    t, decode_steps, running = 0.0, 0, 0
    while any(s.status is not Status.FINISHED for s in states):
        plan = planner.plan(t)
        t += clock.step_seconds(plan.batch)
        planner.complete(plan, t)
        if plan.decodes:
            decode_steps += 1
            running += len(plan.decodes)
    print(f"{REQUESTS} x ({PROMPT} + {OUTPUT}) tokens on {blocks} KV blocks: all done in {t:.2f} s emulated, "
          f"{running / decode_steps:.1f} sequences per decode step, "
          f"{getattr(planner, 'preemptions', 0)} preemptions")


if __name__ == "__main__":
    main()
