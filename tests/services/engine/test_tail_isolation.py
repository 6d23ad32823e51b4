"""The planner's tail isolation (docs/engine.md, "Tail isolation"), driven step by step without a clock."""

from __future__ import annotations

from services.engine.prefix_cache import PrefixCache
from services.engine.sequence import SequenceState
from services.engine.step_planner import EngineConfig, StepPlanner
from tests.services.engine.conftest import VOCAB, fresh, prompt

CHUNK, BUDGET = 64, 256


def run_steps(isolate: bool, lengths: list[int]) -> list[list[int]]:
    """Chunk sizes of every step until all prefills are done (each request generates one token)."""
    config = EngineConfig(kv_capacity_blocks=4096, vocab_size=VOCAB, chunk_size=CHUNK, max_num_batched_tokens=BUDGET,
                          isolate_tail_chunks=isolate)
    planner = StepPlanner(config, PrefixCache(config.kv_capacity_blocks, config.block_size))
    for i, length in enumerate(lengths):
        planner.enqueue(SequenceState(fresh(f"r{i}", prompt(length, salt=i), generate=1),
                                      config.block_size, VOCAB, 0.0))
    steps, t = [], 0.0
    while (plan := planner.plan(t)) is not None:
        steps.append([tokens for _, tokens in plan.chunks])
        t += 1.0
        planner.complete(plan, t)
    return steps


def test_tails_share_steps_by_default():
    steps = run_steps(isolate=False, lengths=[140, 140])
    assert steps[0] == [64, 64] and steps[2] == [12, 12]  # 140 = 64 + 64 + 12, in lock-step


def test_an_isolated_tail_runs_without_other_chunks():
    steps = run_steps(isolate=True, lengths=[140, 140])
    assert steps[:2] == [[64, 64], [64, 64]]
    assert steps[2:] == [[12], [12]]  # each tail alone, in order


def test_a_single_chunk_prompt_is_not_a_tail():
    assert run_steps(isolate=True, lengths=[50, 50, 50]) == [[50, 50, 50]]


def test_a_budget_cut_chunk_completes_as_a_tail():
    # Five 50-token prompts take 250 of the 256-token budget; the sixth gets 6 now and its last 44 alone.
    assert run_steps(isolate=True, lengths=[50] * 6) == [[50, 50, 50, 50, 50, 6], [44]]
    assert run_steps(isolate=False, lengths=[50] * 6) == [[50, 50, 50, 50, 50, 6], [44]]


def test_isolation_computes_every_token_within_the_budget():
    for isolate in (False, True):
        steps = run_steps(isolate, lengths=[300, 70, 130])
        assert sum(sum(step) for step in steps) == 300 + 70 + 130
        assert all(sum(step) <= BUDGET for step in steps)
