"""A lone fresh 61,440-token prompt on paper-pd-intra: the engine's TTFT against `pdd-emu predict`.

The engine is driven step by step on the preset's prefill instance (its sizing, its clock), so
the emulated time is exact; the reference is the sum of predict's whole-budget chunk times,
each chunk over the context already cached (docs/engine.md, "Long prompts").
"""

from __future__ import annotations

import json

from services.engine.prefix_cache import PrefixCache
from services.engine.roofline import RooflineClock
from services.engine.sequence import Sequence, SequenceState, Status
from services.engine.step_planner import EngineConfig, StepPlanner
from services.profiles import load_gpu, load_model
from services.scenario import load_scenario
from services.scenario.sizing import instance_sizing
from tests.services.cli.in_process import cli  # noqa: F401  (the fixture)
from tests.tolerance import assert_close

PROMPT_TOKENS = 61440


def engine_ttft(scenario_name: str) -> tuple[float, list[int]]:
    scenario = load_scenario(scenario_name)
    pool = next(p for p in scenario.pools if p.role.value == "prefill")
    model, sizing = load_model(scenario.model), instance_sizing(scenario, pool)
    clock = RooflineClock(load_gpu(pool.gpu), model, tp=pool.tp, dp_attention=pool.dp_attention, ep=pool.ep)
    config = EngineConfig(kv_capacity_blocks=sizing.kv_capacity_blocks, vocab_size=model.vocab_size,
                          max_num_batched_tokens=scenario.engine.max_batched_tokens,
                          chunk_size=scenario.engine.long_prefill_token_threshold, max_running=sizing.max_running,
                          max_context=model.max_context, host_cache_blocks=sizing.host_cache_blocks)
    planner = StepPlanner(config, PrefixCache(config.kv_capacity_blocks, config.block_size, config.host_cache_blocks))
    ids = [(i * 7919 + 13) % model.vocab_size for i in range(PROMPT_TOKENS)]
    state = SequenceState(Sequence("long", ids, PROMPT_TOKENS, 0, 1, 0, seed=1), config.block_size,
                          model.vocab_size, 0.0)
    planner.enqueue(state)
    t = 0.0
    while state.status is not Status.FINISHED:
        plan = planner.plan(t)
        assert plan is not None
        t += clock.step_seconds(plan.batch)
        planner.complete(plan, t)
    return state.stats.first_token_t, state.stats.chunks


def test_a_lone_61440_token_prompt_is_within_15_percent_of_eight_whole_budget_chunks(cli):
    ttft, chunks = engine_ttft("paper-pd-intra")
    assert chunks == [8192] * 7 + [4096]  # eight chunks: seven whole budgets and the rest
    predicted = 0.0
    for cached in range(0, PROMPT_TOKENS, 8192):
        shape = ("--extend-tokens", "8192", "--context", str(cached)) if cached else ("--prefill-tokens", "8192")
        if cached + 8192 > PROMPT_TOKENS:
            shape = ("--extend-tokens", str(PROMPT_TOKENS - cached), "--context", str(cached))
        code, out, err = cli("predict", "--gpu", "h100-sxm", "--model", "pdd-paper", "--tp", "16", *shape, "--json")
        assert code == 0, err
        predicted += json.loads(out)["seconds"]
    print(f"engine TTFT {ttft:.3f} s, predict sum {predicted:.3f} s")
    assert_close(ttft, predicted, rel=0.15, what="61,440-token TTFT against the chunk sum")
