"""Chunked prefill, block-by-block KV and preemption (docs/engine.md, "Scheduling"), driven step by step."""

from __future__ import annotations

from services.engine.sequence import Status
from services.engine.sizing import default_max_running
from services.engine.step_planner import EngineConfig
from tests.services.engine.conftest import VOCAB
from tests.services.engine.planning import planner, step, submit


def test_one_request_takes_the_whole_step_budget():
    p = planner()
    state = submit(p, "long", 20000, generate=1)
    while state.status in (Status.RUNNING, Status.WAITING):
        step(p)
    assert state.stats.chunks == [8192, 8192, 3616]


def test_a_per_request_cap_cuts_long_prefills():
    p = planner(chunk_size=2048)  # vLLM's long_prefill_token_threshold
    state = submit(p, "long", 5000, generate=1)
    while state.status in (Status.RUNNING, Status.WAITING):
        step(p)
    assert state.stats.chunks == [2048, 2048, 904]


def test_decodes_go_first_and_a_prefill_takes_the_rest_of_the_budget():
    p = planner(max_num_batched_tokens=1000)
    decoders = [submit(p, f"d{i}", 20, generate=50, salt=i) for i in range(3)]
    step(p)  # their prefills
    submit(p, "long", 5000, generate=1, salt=9)
    plan = step(p, 1.0)
    assert {id(s) for s in plan.decodes} == {id(s) for s in decoders}
    assert [tokens for _, tokens in plan.chunks] == [997]


def test_the_running_cap_defaults_to_sglangs_request_pool_size():
    assert default_max_running(3_300_000, 131072) == 4096  # 12,890 clamped to SGLang's 4096
    assert default_max_running(600_000, 131072) == 2343
    assert default_max_running(100_000, 131072) == 2048
    config = EngineConfig(kv_capacity_blocks=37_500, vocab_size=VOCAB, max_context=131072)
    assert config.running_cap == default_max_running(37_500 * 16, 131072) == 2343
    assert EngineConfig(kv_capacity_blocks=10, vocab_size=VOCAB, max_running=48).running_cap == 48
