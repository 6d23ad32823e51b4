"""The host-memory prefix tier against the prefill cache cliff: agents revisiting 64K prefixes.

    python -m benchmarks.bench_host_tier [--agents 120]

Each agent's prefix (64K fresh tokens) is prefilled once on the paper-pd-intra prefill instance
(H100 TP16, pdd-paper), one agent after another; then every agent comes back with 256 new
tokens on top of it. Planner-driven on the roofline clock, emulated time. Printed per setting:
the second round's prefix hit rate, how much of it came from host memory, and its mean TTFT
(docs/engine.md, "Host tier": before and after).
"""

from __future__ import annotations

import argparse

from services.engine.prefix_cache import PrefixCache
from services.engine.roofline import RooflineClock
from services.engine.sequence import Sequence, SequenceState, Status
from services.engine.step_planner import EngineConfig, StepPlanner
from services.profiles import load_gpu, load_model
from services.scenario import load_scenario
from services.scenario.sizing import instance_sizing

PREFIX, TURN = 65536, 256


def run(agents: int, host_tier: bool) -> str:
    scenario = load_scenario("paper-pd-intra", [] if host_tier else ["engine.host_cache_bytes=0"])
    pool = next(p for p in scenario.pools if p.name == "prefill")
    model, sizing = load_model(scenario.model), instance_sizing(scenario, pool)
    clock = RooflineClock(load_gpu(pool.gpu), model, tp=pool.tp)
    config = EngineConfig(kv_capacity_blocks=sizing.kv_capacity_blocks, vocab_size=model.vocab_size,
                          max_context=model.max_context, host_cache_blocks=sizing.host_cache_blocks)
    planner = StepPlanner(config, PrefixCache(config.kv_capacity_blocks, config.block_size, config.host_cache_blocks))

    def prefill(request_id: str, ids: list[int]) -> SequenceState:
        state = SequenceState(Sequence(request_id, ids, len(ids), 0, 1, 0, seed=0), config.block_size,
                              model.vocab_size, 0.0)
        planner.enqueue(state)
        t = 0.0
        while state.status is not Status.FINISHED:
            plan = planner.plan(t)
            t += clock.step_seconds(plan.batch)
            planner.complete(plan, t)
        return state

    prefixes = [[(j * 7919 + a * 104729) % 120000 for j in range(PREFIX)] for a in range(agents)]
    for a, ids in enumerate(prefixes):
        prefill(f"first-{a}", ids)
    hits = host_hits = 0
    ttft = 0.0
    for a, ids in enumerate(prefixes):
        state = prefill(f"again-{a}", ids + [(a + j) % 1000 for j in range(TURN)])
        hits += state.stats.cache_hit_tokens
        host_hits += state.stats.host_hit_tokens
        ttft += state.stats.first_token_t
    total = agents * (PREFIX + TURN)
    return (f"{agents} agents, host tier {'on ' if host_tier else 'off'} ({sizing.host_cache_blocks * 16:,} tokens): "
            f"second-round hit rate {hits / total:.1%} ({host_hits / total:.1%} from host memory), "
            f"mean TTFT {ttft / agents * 1e3:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=120)
    args = parser.parse_args()
    for host_tier in (False, True):
        print(run(args.agents, host_tier))


if __name__ == "__main__":
    main()
