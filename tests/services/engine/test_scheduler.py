"""Engine behaviour through its public API, with a recording step clock instead of the roofline."""

import asyncio

import pytest

from services.engine.batch import Chunk
from services.engine.pieces import BYTE_TOKENS
from services.engine.scheduler import EngineFull, EngineStopped
from services.engine.sequence import Sequence, Status
from services.engine.tokens import output_token, prompt_fingerprint
from tests.services.engine.conftest import VOCAB, RecordingClock, collect, fresh, next_tokens, prompt
from tests.tolerance import assert_at_least, assert_close


async def test_generates_exactly_the_requested_tokens(make_engine):
    engine = await make_engine()
    ids = prompt(40)
    tokens, finished = await collect(engine.submit(fresh("r", ids, generate=7, seed=11)))
    assert [t.position for t in tokens] == list(range(7))
    fingerprint = prompt_fingerprint(ids)
    assert [t.token_id for t in tokens] == [output_token(fingerprint, p, 11, VOCAB) for p in range(7)]
    assert finished is not None and finished.stats.generated_tokens == 7
    assert engine.stats().tokens_generated == 7
    assert finished.stats.computed_tokens == 40 + 6  # the prompt, then one decode per later token


async def test_a_continuation_elsewhere_produces_the_same_text(make_engine):
    first, second = await make_engine(name="a"), await make_engine(name="b")
    ids = prompt(50, salt=2)
    whole, _ = await collect(first.submit(fresh("r", ids, generate=20, seed=4)))
    head = [t.token_id for t in whole[:8]]
    moved = Sequence("r", ids + head, prompt_len=50, kv_tokens=50, generate=12, first_position=8, seed=4)
    rest, _ = await collect(second.submit(moved))
    assert [(t.position, t.token_id) for t in rest] == [(t.position, t.token_id) for t in whole[8:]]


async def test_a_prefill_only_request_produces_its_first_token(make_engine):
    engine = await make_engine()
    ids = prompt(700)
    tokens, finished = await collect(engine.submit(fresh("p", ids, generate=1, seed=3)))
    assert [(t.position, t.token_id) for t in tokens] == [(0, output_token(prompt_fingerprint(ids), 0, 3, VOCAB))]
    assert finished.stats.prefill_done_t == finished.stats.first_token_t == finished.stats.finished_t


async def test_received_kv_plus_the_first_token_starts_as_a_decode(make_engine):
    clock = RecordingClock()
    engine = await make_engine(clock)
    ids = prompt(500)
    first = output_token(prompt_fingerprint(ids), 0, 0, VOCAB)
    seq = Sequence("r", ids + [first], prompt_len=500, kv_tokens=500, generate=4, first_position=1, seed=0)
    tokens, _ = await collect(engine.submit(seq))
    assert [t.position for t in tokens] == [1, 2, 3, 4]
    assert clock.batches[0].chunks == () and clock.batches[0].decode_contexts == (501,)


async def test_running_sequences_are_capped(make_engine):
    clock = RecordingClock()
    engine = await make_engine(clock, max_running=2)
    handles = [engine.submit(fresh(f"r{i}", prompt(50, salt=i), generate=6)) for i in range(5)]
    await asyncio.gather(*(collect(h) for h in handles))
    assert max(len(b.chunks) + len(b.decode_contexts) for b in clock.batches) == 2
    assert engine.stats().requests_finished == 5


async def test_one_request_id_at_a_time(make_engine):
    engine = await make_engine(start=False)
    engine.submit(fresh("same", prompt(10), generate=1))
    with pytest.raises(ValueError, match="already on this engine"):
        engine.submit(fresh("same", prompt(10), generate=1))


async def test_a_long_prompt_is_cut_at_chunk_size_boundaries(make_engine):
    clock = RecordingClock()
    engine = await make_engine(clock, chunk_size=2048)
    _, finished = await collect(engine.submit(fresh("r", prompt(5000), generate=2)))
    assert finished.stats.chunks == [2048, 2048, 904]
    chunks = [c for batch in clock.batches for c in batch.chunks]
    assert chunks == [Chunk(2048, 0), Chunk(2048, 2048), Chunk(904, 4096)]


async def test_chunks_count_from_the_cached_prefix(make_engine):
    engine = await make_engine(chunk_size=100, block_size=16)
    await collect(engine.submit(fresh("a", prompt(160), generate=1)))
    _, finished = await collect(engine.submit(fresh("b", prompt(160) + prompt(250, salt=5), generate=1)))
    assert finished.stats.cache_hit_tokens == 160
    assert finished.stats.chunks == [100, 100, 50]  # the uncached 250 tokens: two full chunks and a tail


async def test_every_step_respects_the_token_budget(make_engine):
    clock = RecordingClock()
    engine = await make_engine(clock, max_num_batched_tokens=300, chunk_size=128)
    handles = [engine.submit(fresh(f"r{i}", prompt(200 + 37 * i, salt=i), generate=5)) for i in range(12)]
    await asyncio.gather(*(collect(h) for h in handles))
    assert max(b.new_tokens for b in clock.batches) == 300  # the budget is used...
    assert all(b.new_tokens <= 300 for b in clock.batches)  # ...and never exceeded
    assert all(c.new_tokens <= 128 for b in clock.batches for c in b.chunks)


async def test_decodes_and_prefill_chunks_share_a_step(make_engine):
    clock = RecordingClock()
    engine = await make_engine(clock)
    decoding = engine.submit(fresh("long", prompt(30), generate=200))
    await next_tokens(decoding, 2)
    await collect(engine.submit(fresh("late", prompt(10000, salt=1), generate=1)))
    mixed = [b for b in clock.batches if b.chunks and b.decode_contexts]
    assert mixed, "a prefill chunk never ran in the same step as a decode"
    # the decode goes first; the one prefill takes the rest of the 8192-token budget
    assert mixed[0].decode_contexts[0] > 30 and mixed[0].chunks[0].new_tokens == 8191


async def test_admission_waits_for_kv_blocks_and_resumes_when_freed(make_engine):
    engine = await make_engine(kv_capacity_blocks=20, block_size=16)
    holder = engine.submit(fresh("holder", prompt(200), generate=5))  # 13 blocks for its prompt
    holder.set_limit(1)  # one token, then it sits on its blocks
    driver = engine.submit(fresh("driver", prompt(16, salt=1), generate=60))  # grows to 5 blocks: keeps steps coming
    await next_tokens(holder, 1)
    blocked = engine.submit(fresh("blocked", prompt(112, salt=2), generate=4))  # its prompt's 7 blocks > 5 free
    await next_tokens(driver, 10)  # ten steps ran while it waited
    assert blocked.status is Status.WAITING and blocked.stats.first_scheduled_t is None
    assert engine.stats().waiting == 1
    used_before = engine.stats().kv_blocks_used
    holder.cancel()
    assert engine.stats().kv_blocks_used == used_before - 13  # cancel frees its blocks at once
    tokens, finished = await collect(blocked)
    assert len(tokens) == 4 and finished is not None
    assert finished.stats.queued_s > 0


async def test_a_repeated_prompt_hits_the_prefix_cache(make_engine):
    clock = RecordingClock()
    engine = await make_engine(clock, block_size=16)
    ids = prompt(1000)
    _, first = await collect(engine.submit(fresh("a", ids, generate=3)))
    _, second = await collect(engine.submit(fresh("b", ids, generate=3, seed=9)))
    assert first.stats.cache_hit_tokens == 0
    assert second.stats.cache_hit_tokens == 992  # full blocks, always leaving the last token to compute
    assert second.stats.chunks == [8]
    assert Chunk(8, 992) in clock.batches[-3].chunks
    assert engine.stats().prefix_cache_hit_tokens == 992


async def test_received_output_is_timed_as_an_extend_chunk(make_engine):
    clock = RecordingClock()
    engine = await make_engine(clock)
    ids = prompt(500)
    received = [output_token(prompt_fingerprint(ids), p, 2, VOCAB) for p in range(100)]
    seq = Sequence("r", ids + received, prompt_len=500, kv_tokens=500, generate=3, first_position=100, seed=2)
    tokens, finished = await collect(engine.submit(seq))
    assert clock.batches[0].chunks == (Chunk(new_tokens=100, cached_tokens=500),)
    assert [t.position for t in tokens] == [100, 101, 102]
    assert finished.stats.hit_tokens == 500


async def test_step_deadlines_chain_without_drift(make_engine):
    clock = RecordingClock(per_step_s=0.01)
    engine = await make_engine(clock)
    loop = asyncio.get_running_loop()
    started = loop.time()
    tokens, _ = await collect(engine.submit(fresh("r", prompt(10), generate=20)))
    gaps = [b.t - a.t for a, b in zip(tokens, tokens[1:])]
    assert all(abs(gap - 0.01) < 1e-9 for gap in gaps)  # timestamps are deadlines, not wake-ups
    assert_at_least(loop.time() - started, 0.2 - 1e-3, what="wall time of 20 steps of 10 ms")
    assert_close(loop.time() - started, 0.2, rel=1.0, what="wall time of 20 steps of 10 ms")
    assert_close(engine.stats().busy_seconds, 0.2, rel=1e-9, what="busy seconds")


async def test_an_idle_engine_does_not_spin(make_engine):
    engine = await make_engine()
    await collect(engine.submit(fresh("r", prompt(10), generate=2)))
    calls = 0
    plan = engine._planner.plan

    def counting_plan(start_t):
        nonlocal calls
        calls += 1
        return plan(start_t)

    engine._planner.plan = counting_plan
    for _ in range(50):
        await asyncio.sleep(0)  # yields only: a spinning loop would plan on every pass
    assert calls <= 1


async def test_stop_fails_pending_work(make_engine):
    engine = await make_engine(kv_capacity_blocks=10, block_size=16)
    running = engine.submit(fresh("running", prompt(100), generate=50))
    running.set_limit(1)
    waiting = engine.submit(fresh("waiting", prompt(100, salt=1), generate=5))
    await next_tokens(running, 1)
    assert (running.status, waiting.status) == (Status.RUNNING, Status.WAITING)
    await engine.stop()
    for handle in (running, waiting):
        with pytest.raises(EngineStopped, match="stopped"):
            await collect(handle)
    with pytest.raises(EngineStopped):
        engine.submit(fresh("after", prompt(5), generate=1))


async def test_a_failing_clock_fails_the_requests_loudly(make_engine):
    def broken(batch):
        raise RuntimeError("no such GPU")

    engine = await make_engine(broken)
    with pytest.raises(EngineStopped, match="no such GPU"):
        await collect(engine.submit(fresh("r", prompt(10), generate=2)))
    with pytest.raises(RuntimeError, match="no such GPU"):
        await engine.stop()


async def test_cancelling_the_engines_task_stops_its_steps_as_a_killed_process_does(make_engine):
    engine = await make_engine(RecordingClock(per_step_s=0.005))
    handle = engine.submit(fresh("r", prompt(10), generate=1000))
    await next_tokens(handle, 3)
    engine._task.cancel()  # what a kill of the process does (services/simulate/outage.py)
    await asyncio.gather(engine._task, return_exceptions=True)
    steps = engine.stats().steps
    await asyncio.sleep(0.05)  # ten steps' time: a step still armed would have run by now
    assert engine.stats().steps == steps and handle.status is Status.RUNNING


async def test_impossible_requests_are_refused_with_a_reason(make_engine):
    engine = await make_engine(kv_capacity_blocks=10, block_size=16, max_context=300)
    with pytest.raises(EngineFull, match="capacity"):
        engine.submit(fresh("big", prompt(200), generate=5))
    with pytest.raises(EngineFull, match="context limit"):
        engine.submit(fresh("long", prompt(100), generate=250))
    with pytest.raises(ValueError, match="first_position"):
        engine.submit(Sequence("bad", prompt(20), prompt_len=10, kv_tokens=0, generate=1, first_position=0, seed=0))
    with pytest.raises(ValueError, match="token ids"):  # past the words and the byte tokens (pieces.py)
        engine.submit(fresh("vocab", [VOCAB + BYTE_TOKENS], generate=1))
    engine.submit(fresh("bytes", [VOCAB + BYTE_TOKENS - 1], generate=1))  # a byte token is a prompt's to hold


async def test_preemptions_reach_the_engine_stats_and_every_stream_completes(make_engine):
    engine = await make_engine(kv_capacity_blocks=12, block_size=16)
    old = engine.submit(fresh("old", prompt(64, salt=1), generate=80))  # grows to 9 blocks
    new = engine.submit(fresh("new", prompt(64, salt=2), generate=40))  # grows to 7: both cannot fit
    (old_tokens, _), (new_tokens, new_done) = await asyncio.gather(collect(old), collect(new))
    assert [t.position for t in new_tokens] == list(range(40)) and len(old_tokens) == 80
    assert new_done.stats.preemptions >= 1
    assert engine.stats().preemptions == new_done.stats.preemptions
