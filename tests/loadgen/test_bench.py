"""The benchmark client against the test double in conftest.py."""

import asyncio
import json
from pathlib import Path

import pytest

from loadgen.bench import BenchConfig, BenchError, run_bench
from tests.loadgen.conftest import MODEL, answer_ids
from tests.tolerance import assert_at_least, assert_at_most, assert_close
from tests.waiting import until

SAMPLE = Path(__file__).resolve().parents[2] / "loadgen" / "samples" / "mooncake-sample.jsonl"
RECORD_FIELDS = {"id", "session", "turn", "prompt_tokens", "output_tokens", "ttft_s", "tpot_s", "e2e_s", "itl_s",
                 "status", "error", "pdd", "send_s", "send_unix", "hit_rate"}


def config(router, tmp_path, workload, **settings) -> BenchConfig:
    defaults = {"duration_s": 1.0, "progress": False, "request_timeout_s": 10.0}
    return BenchConfig(url=router.url, workload=workload, out_dir=tmp_path / "run", **(defaults | settings))


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_open_loop_agentic_run_writes_records_and_summary(fake_router, tmp_path):
    cfg = config(fake_router, tmp_path, "agentic:context=4K,initial=1K,output=8..24,think=20ms,turns=6", rate=30)
    summary = await run_bench(cfg)
    records = lines(cfg.out_dir / "requests.jsonl")
    assert RECORD_FIELDS <= set(records[0])
    assert summary.sent == len(records) == len(fake_router.served) > 10
    assert summary.completed == summary.sent and summary.failed == 0
    saved = json.loads((cfg.out_dir / "summary.json").read_text())
    for key in ("sent", "completed", "failed", "goodput_rps", "sla_attainment", "rld_token_share", "wan_bytes",
                "hit_rate_bins"):
        assert key in saved
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        assert {"p50", "p90", "p99"} <= set(saved[key])
    served = {s.request_id: s for s in fake_router.served}
    for r in records:
        assert r["output_tokens"] == r["max_tokens"] == len(r["itl_s"]) + 1
        assert r["ttft_s"] <= r["e2e_s"]
        # the client's expected hit is exactly what the server's prefix cache found
        assert r["hit_rate"] * r["prompt_tokens"] == pytest.approx(served[r["id"]].hit_tokens)
        assert r["pdd"]["prefill_hit_tokens"] == served[r["id"]].hit_tokens
    later = [r["hit_rate"] for r in records if not r["id"].endswith("-t0")]
    assert later and sum(later) / len(later) > 0.3  # later turns really reuse earlier ones
    assert summary.model_dump()["sla"] == {"ttft_s": 5.0, "tpot_s": 0.1}
    assert summary.interrupted is False


async def test_session_turns_wait_for_the_previous_answer(fake_router, tmp_path):
    await run_bench(config(fake_router, tmp_path, "agentic:context=4K,output=8..16,think=0,turns=5", rate=40))
    by_session: dict[str, list] = {}
    for served in fake_router.served:
        session, turn = served.request_id.rsplit("-t", 1)
        by_session.setdefault(session, []).append((int(turn), served))
    continued = 0
    for turns in by_session.values():
        turns.sort(key=lambda item: item[0])
        assert [t for t, _ in turns] == list(range(len(turns)))
        for (_, before), (_, after) in zip(turns, turns[1:]):
            assert after.arrived >= before.finished
            # the next prompt carries the answer the server actually gave
            assert after.prompt[len(before.prompt): len(before.prompt) + before.max_tokens] == before.output_ids
            continued += 1
    assert continued > 5


async def test_open_loop_does_not_wait_for_completions(fake_router, tmp_path):
    fake_router.ttft_base_s = 0.6
    await run_bench(config(fake_router, tmp_path, "poisson:input=64,output=4", rate=40, duration_s=0.5, seed=3))
    assert fake_router.max_in_flight >= 5


async def test_closed_loop_keeps_exactly_n_in_flight(fake_router, tmp_path):
    fake_router.ttft_base_s = 0.05
    summary = await run_bench(config(fake_router, tmp_path, "poisson:input=64,output=4", concurrency=3,
                                     duration_s=0.6))
    assert fake_router.max_in_flight == 3
    assert summary.concurrency == 3 and summary.offered_rate is None
    assert summary.completed >= 6


async def test_ttft_order_follows_uncached_prompt_length(fake_router, tmp_path):
    fake_router.ttft_per_miss_token_s = 1e-4  # 0.1 s per 1000 uncached tokens
    summary = await run_bench(config(fake_router, tmp_path, "poisson:input=100..4000,output=3", concurrency=2,
                                     max_requests=12, duration_s=30))
    records = lines(tmp_path / "run" / "requests.jsonl")
    assert summary.completed == 12
    for a in records:
        for b in records:
            if b["prompt_tokens"] - a["prompt_tokens"] >= 1000:
                assert a["ttft_s"] < b["ttft_s"], (a["id"], b["id"])
    longest = max(records, key=lambda r: r["prompt_tokens"])
    assert_close(longest["ttft_s"], 0.002 + longest["prompt_tokens"] * 1e-4, rel=0.5, what="TTFT of the longest")


async def test_failures_are_recorded_and_the_run_goes_on(fake_router, tmp_path):
    modes = {"q1": "http", "q2": "sse", "q3": "truncate", "q4": "stall"}
    fake_router.fail = lambda served: modes.get(served.request_id)
    summary = await run_bench(config(fake_router, tmp_path, "poisson:input=32,output=6", concurrency=2,
                                     max_requests=8, duration_s=30, request_timeout_s=0.5))
    records = {r["id"]: r for r in lines(tmp_path / "run" / "requests.jsonl")}
    assert len(records) == 8
    assert records["q1"]["status"] == "error" and records["q1"]["http_status"] == 503
    assert "no capacity" in records["q1"]["error"]
    assert records["q2"]["status"] == "error" and "decode instance died" in records["q2"]["error"]
    assert records["q2"]["output_tokens"] == 2
    assert records["q3"]["status"] == "error" and "before the final chunk" in records["q3"]["error"]
    assert records["q4"]["status"] == "timeout" and records["q4"]["ttft_s"] is None
    assert_close(records["q4"]["elapsed_s"], 0.5, rel=0.5, what="time until the deadline gave up")
    assert all(records[f"q{i}"]["status"] == "ok" for i in (0, 5, 6, 7))
    assert (summary.completed, summary.failed) == (4, 4)
    assert summary.errors == {"http_503": 1, "server_error": 1, "truncated": 1, "timeout": 1}


@pytest.mark.parametrize(("token_ids", "last_chunk_has_token"), [(True, True), (False, False), (False, True)])
async def test_token_counting_does_not_depend_on_chunk_layout(fake_router, tmp_path, token_ids, last_chunk_has_token):
    fake_router.send_token_ids = token_ids
    fake_router.last_chunk_has_token = last_chunk_has_token
    summary = await run_bench(config(fake_router, tmp_path, "poisson:input=50,output=9", concurrency=1,
                                     max_requests=3, duration_s=30))
    records = lines(tmp_path / "run" / "requests.jsonl")
    assert summary.completed == 3
    assert [r["output_tokens"] for r in records] == [9, 9, 9]
    assert all(r["usage"]["completion_tokens"] == 9 for r in records)


async def test_sessions_reuse_outputs_decoded_from_text_alone(fake_router, tmp_path):
    fake_router.send_token_ids = False  # like the real router: words only
    await run_bench(config(fake_router, tmp_path, "agentic:context=4K,output=8..16,think=0,turns=4,hits=0/0/0/0/0/0/1",
                           concurrency=2, max_requests=12, duration_s=30))
    records = lines(tmp_path / "run" / "requests.jsonl")
    served = {s.request_id: s for s in fake_router.served}
    later = [r for r in records if r["turn"] > 0]
    assert later
    for r in later:
        # the previous answer, read back from its words, is in the cache exactly; its target is in the
        # 99.5-100% bin (the prompt's whole-token rounding can land a hair under). Had the 8-16 output
        # tokens not been reused, a prompt of about 1K tokens would hit at most about 98.5%.
        assert served[r["id"]].hit_tokens == round(r["hit_rate"] * r["prompt_tokens"])
        assert r["hit_rate"] >= 0.99


async def test_max_requests_and_explicit_model(fake_router, tmp_path):
    summary = await run_bench(config(fake_router, tmp_path, "poisson:input=16,output=2", rate=200,
                                     max_requests=7, model=MODEL, duration_s=30))
    assert summary.sent == 7 == len(fake_router.served)


async def test_wrong_model_fails_every_request_with_the_server_message(fake_router, tmp_path):
    summary = await run_bench(config(fake_router, tmp_path, "poisson:input=16,output=2", concurrency=1,
                                     max_requests=2, model="other", duration_s=30))
    assert summary.failed == 2 and summary.errors == {"http_404": 2}


async def test_unreachable_router_is_a_clear_error(tmp_path):
    cfg = BenchConfig(url="http://127.0.0.1:9", workload="poisson", rate=1, out_dir=tmp_path, progress=False)
    with pytest.raises(BenchError, match="cannot list models"):
        await run_bench(cfg)


async def test_trace_replay_keeps_the_trace_timing(fake_router, tmp_path):
    # speed 20: the 40 requests span 0.6 s, so some finish before a later one sharing their prefix
    # arrives even on a loaded machine (at 100 they all arrived within 0.12 s, and reuse could not show)
    summary = await run_bench(config(fake_router, tmp_path, f"mooncake:{SAMPLE}:speed=20,limit=40,max_output=4",
                                     duration_s=30))
    assert summary.sent == 40 and summary.offered_rate is None
    trace = [json.loads(line) for line in SAMPLE.read_text().splitlines()[:40]]
    records = sorted(lines(tmp_path / "run" / "requests.jsonl"), key=lambda r: int(r["id"][1:]))
    for row, r in zip(trace, records):
        assert r["prompt_tokens"] == row["input_length"]
        assert_close(r["send_s"], (row["timestamp"] - trace[0]["timestamp"]) / 1000 / 20, rel=0.0, abs_=0.25,
                     what=f"send time of {r['id']}")
    served = {s.request_id: s for s in fake_router.served}
    assert any(r["hit_rate"] > 0 for r in records), "the sample's first 40 requests share prefixes"
    checked = 0
    for index, (row, r) in enumerate(zip(trace, records)):
        # the test double caches a request once it has finished: expect reuse of those only
        done = [trace[j]["hash_ids"] for j in range(index) if served[f"r{j}"].finished < served[r["id"]].arrived]
        blocks = max((_common(row["hash_ids"], ids) for ids in done), default=0)
        expected = min(512 * blocks, row["input_length"])
        assert served[r["id"]].hit_tokens >= expected, r["id"]
        checked += expected > 0
    assert checked >= 1


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


async def test_cancelling_the_run_keeps_partial_results(fake_router, tmp_path):
    fake_router.fail = lambda served: "stall" if served.request_id.endswith("-t1") else None
    cfg = config(fake_router, tmp_path, "agentic:context=2K,output=4,think=0,turns=3", rate=50, duration_s=60)
    run = asyncio.ensure_future(run_bench(cfg))
    await until(lambda: any(s.request_id.endswith("-t1") for s in fake_router.served),
                "a second turn reached the router", 20)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run, timeout=20)
    saved = json.loads((cfg.out_dir / "summary.json").read_text())
    records = lines(cfg.out_dir / "requests.jsonl")
    assert saved["sent"] == len(records) >= 2 and saved["interrupted"] is True
    assert_at_least(saved["cancelled"], 1, what="cancelled requests")
    assert saved["completed"] >= 1


async def test_a_rate_or_concurrency_is_needed_without_trace_timing(fake_router, tmp_path):
    with pytest.raises(BenchError, match="give a rate or a concurrency"):
        await run_bench(config(fake_router, tmp_path, "agentic"))
    with pytest.raises(ValueError, match="not both"):
        config(fake_router, tmp_path, "agentic", rate=1, concurrency=1)


def test_answers_of_the_test_double_are_deterministic():
    assert answer_ids([1, 2, 3], 5) == answer_ids([1, 2, 3], 5)
    assert answer_ids([1, 2, 3], 5) != answer_ids([1, 2, 4], 5)


async def test_a_workload_config_object_works_like_its_spec(fake_router, tmp_path):
    from loadgen.workloads import SyntheticConfig

    workload = SyntheticConfig(input="20", output="3", requests=4)
    summary = await run_bench(config(fake_router, tmp_path, workload, concurrency=2, duration_s=30))
    assert summary.sent == 4 and summary.completed == 4
    assert summary.workload == "poisson:input=20,output=3,requests=4"


async def test_a_closed_loop_users_first_session_joins_one_in_progress(fake_router, tmp_path):
    # Six users join at once; their first sessions (s0..s5) are cut to the rest of a session in progress,
    # so they do not all end together; every session opened after them runs its whole four turns.
    cfg = config(fake_router, tmp_path, "agentic:context=4K,initial=1K,output=4..8,think=0,turns=4",
                 concurrency=6, max_requests=60, duration_s=30)
    await run_bench(cfg)
    turns: dict[str, int] = {}
    for record in lines(cfg.out_dir / "requests.jsonl"):
        turns[record["session"]] = max(turns.get(record["session"], 0), record["turn"] + 1)
    first = [turns[f"s{i}"] for i in range(6)]
    assert len(set(first)) > 1 and max(first) <= 4
    whole = [n for session, n in turns.items() if int(session[1:]) >= 6]
    assert whole.count(4) >= len(whole) - 6  # all but the sessions the request budget cut off


async def _closed_loop(path: Path, send, users: int, **options) -> list:
    """drive_closed_loop's `users` over one agentic workload (seed 0) for 12 requests, each answered by
    `send`; the records, as the recorder wrote them to `path`."""
    import random

    from loadgen.bench.dispatch import Dispatcher, Recorder, RunClock
    from loadgen.bench.drive import drive_closed_loop
    from loadgen.spec import parse_spec
    from loadgen.workloads import AgenticWorkload

    workload = AgenticWorkload(parse_spec("agentic:context=4K,initial=1K,output=4,think=0,turns=3"),
                               random.Random(0))
    stop = asyncio.Event()
    clock = RunClock(30.0, stop)
    recorder = Recorder(path, False, None)
    dispatcher = Dispatcher(send, recorder, clock, 12, stop)
    try:
        await drive_closed_loop(workload, dispatcher, clock, users, **options)
        await dispatcher.drain()
    finally:
        recorder.close()
    return recorder.records


async def _answer_at_once(plan, send_s):
    from loadgen.bench.records import RequestRecord

    return RequestRecord.sent(plan, send_s), [7] * plan.max_tokens


async def test_closed_loop_users_join_at_their_given_times_and_every_send_is_reported(tmp_path):
    async def run(starts):
        sends: list[str] = []
        records = await _closed_loop(tmp_path / "requests.jsonl", _answer_at_once, 3, starts=starts,
                                     on_send=lambda: sends.append("sent"))
        assert len(sends) == len(records) == 12  # every send reported as it left
        return [r.send_s for r in records]

    assert min(await run([0.2, 0.2, 0.2])) >= 0.2
    assert min(await run(None)) < 0.2
    with pytest.raises(ValueError, match="2 join times for 3 users"):
        await run([0.0, 0.1])


async def test_a_session_id_names_the_same_prompts_however_the_users_join(tmp_path):
    # With answers at once and users joining one after another, the first user runs the whole request
    # budget before the others join; all joining together, each runs its own. A session id must name
    # the same prompts either way (the simulation and the mesh answer at different speeds).
    async def run(ramp_s: float) -> dict[str, list[int]]:
        prompts: dict[str, list[int]] = {}

        async def send(plan, send_s):
            prompts[plan.request_id] = plan.prompt
            return await _answer_at_once(plan, send_s)

        await _closed_loop(tmp_path / f"requests-{ramp_s}.jsonl", send, 3, ramp_s=ramp_s)
        return prompts

    together, one_by_one = await run(0.0), await run(30.0)
    assert {plan_id.split("-")[0] for plan_id in together} >= {"s0", "s1", "s2"}
    assert {plan_id.split("-")[0] for plan_id in one_by_one} >= {"s0", "s3"}  # the first user's own sessions
    shared = together.keys() & one_by_one.keys()
    assert len(shared) >= 3
    assert all(together[rid] == one_by_one[rid] for rid in shared)


async def test_a_paced_closed_loop_sends_at_the_given_offsets_or_once_the_answer_is_in(tmp_path):
    # Paced by another run's sends (docs/simulate.md, "Agreement with the mesh"): a named request
    # leaves at its offset, or when its previous answer is in if that is later; an unnamed one as unpaced.
    free = await _closed_loop(tmp_path / "free.jsonl", _answer_at_once, 2)
    assert max(r.send_s for r in free) < 0.05  # answered at once, think 0: every send at the start
    ids = [r.id for r in free]
    send_at = {rid: 0.04 * (i + 1) for i, rid in enumerate(ids[:8])}
    held = next(rid for rid in ids[:6] if rid.endswith("-t0") and f"{rid[:-3]}-t1" in send_at)
    follower = f"{held[:-3]}-t1"

    async def send(plan, send_s):
        if plan.request_id == held:
            await asyncio.sleep(send_at[follower] + 0.15)  # its answer comes after its follower's offset
        return await _answer_at_once(plan, send_s)

    paced = {r.id: r.send_s for r in await _closed_loop(tmp_path / "paced.jsonl", send, 2, send_at=send_at)}
    named = [rid for rid in send_at if rid in paced]  # the held session leaves others the 12-request budget
    assert follower in named and len(named) >= 6
    for rid in named:
        assert_at_least(paced[rid], send_at[rid], what=f"{rid}'s send")
    assert_at_least(paced[follower], send_at[held] + send_at[follower] + 0.15, what="the held session's next turn")
    on_time = [rid for rid in named if rid != follower and paced[rid] < paced[follower]]
    assert on_time
    for rid in on_time:
        assert_at_most(paced[rid], send_at[rid] + 0.1, what=f"{rid}'s send")
