"""KV admission by blocks, block growth, preemption and received KV (docs/engine.md, "Admission", "Received KV")."""

from __future__ import annotations

from services.engine.sequence import Sequence, SequenceState, Status
from services.engine.step_planner import StepPlanner
from tests.services.engine.conftest import VOCAB, prompt
from tests.services.engine.planning import planner, step, submit, tokens_of


def test_admission_takes_the_prompt_blocks_and_decode_grows_them_one_by_one():
    p = planner(block_size=16)
    state = submit(p, "r", 100, generate=60)
    step(p)
    assert p.cache.held_blocks("r") == 7  # ceil(100 / 16): not prompt + max output up front
    held = [p.cache.held_blocks("r")]
    while state.status is Status.RUNNING:
        step(p)
        if state.status is Status.RUNNING:
            held.append(p.cache.held_blocks("r"))
    assert held[-1] == -(-(100 + 59) // 16)  # every token's KV but the last generated one
    assert all(b - a in (0, 1) for a, b in zip(held, held[1:]))


def test_running_out_of_blocks_preempts_the_newest_and_recomputes_it():
    p = planner(kv_capacity_blocks=12, block_size=16)
    old = submit(p, "old", 64, generate=80, salt=1)  # 4 prompt blocks, grows to 9
    new = submit(p, "new", 64, generate=40, salt=2)  # 4 prompt blocks, grows to 7
    t = 0.0
    while old.status is not Status.FINISHED or new.status is not Status.FINISHED:
        plan = p.plan(t)
        assert plan is not None
        p.complete(plan, t + 1.0)
        t += 1.0
    assert p.preemptions >= 1 and new.stats.preemptions >= 1 and old.stats.preemptions == 0
    assert new.stats.computed_tokens > 64 + 39  # its KV was computed again after the preemption
    # the output is the one an unhindered run gives: recompute loses and repeats nothing
    alone = planner()
    reference = submit(alone, "new", 64, generate=40, salt=2)
    while reference.status is not Status.FINISHED:
        step(alone)
    produced = tokens_of(new)
    assert len(produced) == 40 and produced == tokens_of(reference)
    assert p.cache.used_blocks == 0


def received(request_id: str, ids: list[int], kv_from: int, generate: int = 3) -> SequenceState:
    """A decode-side request: ids[kv_from:] arrived over a link, the prefix below is expected cached."""
    seq = Sequence(request_id, ids + [1], prompt_len=len(ids), kv_tokens=len(ids), generate=generate,
                   first_position=1, seed=0, kv_from=kv_from)
    return SequenceState(seq, 16, VOCAB, 0.0)


def run_to_end(p: StepPlanner, state: SequenceState) -> list:
    plans = []
    while state.status in (Status.RUNNING, Status.WAITING):
        plans.append(step(p))
    return plans


def receive_after(p: StepPlanner, warm_tokens: int, kv_from: int = 4096) -> tuple[SequenceState, list]:
    """Cache `warm_tokens` of the prompt (0: nothing), then run a request whose prompt[kv_from:] was received."""
    if warm_tokens:
        run_to_end(p, submit(p, "warm", warm_tokens, generate=1))
    state = received("r", prompt(8192), kv_from=kv_from)
    p.enqueue(state)
    return state, run_to_end(p, state)


def test_received_kv_on_top_of_a_cached_prefix_decodes_at_once():
    state, _ = receive_after(planner(), 4096)
    assert state.stats.chunks == [] and state.stats.computed_tokens == 3  # three decodes, nothing recomputed


def test_a_prefix_the_instance_no_longer_holds_is_computed_again():
    # The sender shipped prompt[4096:] against a cache that held 4096 tokens; this instance holds none
    state, plans = receive_after(planner(), 0)
    assert state.stats.chunks == [4096]  # the missing prefix, and not the 4096 received tokens
    assert plans[0].batch.chunks[0].cached_tokens == 0 and state.stats.computed_tokens == 4096 + 3


def test_a_partly_held_prefix_recomputes_only_the_rest_of_it():
    state, plans = receive_after(planner(), 1024)
    assert state.stats.chunks == [4096 - 1024] and plans[0].batch.chunks[0].cached_tokens == 1024


def test_a_prefix_in_host_memory_is_loaded_under_received_kv():
    p = planner(kv_capacity_blocks=600, host_cache_blocks=1024)
    run_to_end(p, submit(p, "warm", 4096, generate=1))  # 256 blocks
    run_to_end(p, submit(p, "other", 8000, generate=1, salt=5))  # 500 blocks: pushes "warm" to host memory
    state, plans = receive_after(p, 0)
    loaded = state.stats.host_hit_tokens
    assert loaded > 0 and plans[0].batch.host_load_tokens == loaded  # its load is paid, not free
    assert state.stats.cache_hit_tokens + sum(state.stats.chunks) == 4096
