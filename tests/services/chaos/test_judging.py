"""How a chaos run judges one answer and a recovery, without a mesh."""

from __future__ import annotations

import json

import pytest

from netem.schedule import parse_schedule
from services.chaos.client import StreamJudge
from services.chaos.faults import WanJitter
from services.chaos.outcomes import FaultFreeText, Outcome, percentile
from services.chaos.recovery import Baseline, healthy_run_start, recovered_at
from services.chaos.scenarios import SCENARIOS, not_applicable
from services.chaos.slow import ChunkedBody
from services.engine.tokens import WordTokenizer, output_token, prompt_fingerprint

VOCAB = 128256
TEXT = FaultFreeText(seed=7, vocab=VOCAB)
PROMPT = [5, 6, 7, 8]


def _events(pieces: list[str], final: bool = True, done: bool = True) -> list[str]:
    lines = [f'data: {json.dumps({"choices": [{"text": p, "finish_reason": None}]})}' for p in pieces]
    if final:
        lines.append('data: {"choices": [{"text": "", "finish_reason": "length"}], "pdd": {"pipeline": "P-MD"}}')
    if done:
        lines.append("data: [DONE]")
    return [part for line in lines for part in (line, "")]  # each event ends with a blank line


def _judge(lines: list[str], expected: str) -> Outcome:
    outcome = Outcome("r", "steady")
    judge = StreamJudge(outcome, expected, sent_at=0.0, clock_start=0.0)
    for line in lines:
        if judge.feed_line(line):
            return outcome
    judge.end("lost", "stream ended")
    return outcome


def test_fault_free_text_is_the_deterministic_token_function():
    ids = TEXT.ids(PROMPT, 3)
    assert ids == [output_token(prompt_fingerprint(PROMPT), i, 7, VOCAB) for i in range(3)]
    assert TEXT.text(ids) == WordTokenizer(VOCAB).decode(ids)


def test_exact_text_completes_and_anything_else_is_judged():
    words = [WordTokenizer(VOCAB).token_text(i) for i in TEXT.ids(PROMPT, 4)]
    expected = "".join(words)
    done = _judge(_events(words), expected)
    assert done.kind == "completed" and done.tokens == 4 and done.pipeline == "P-MD"
    swapped = _judge(_events([words[1], words[0], *words[2:]]), expected)
    assert swapped.kind == "corrupted"  # reordered tokens
    assert _judge(_events(words + words[-1:]), expected).kind == "corrupted"  # a duplicated token
    assert _judge(_events(words[:2], final=False, done=False), expected).kind == "lost"  # silently truncated
    assert _judge(_events(words, final=False), expected).kind == "lost"  # [DONE] but no final chunk


def test_error_events_are_failures_only_with_a_message():
    explicit = ["data: " + json.dumps({"error": {"message": "main decode failed", "type": "upstream_error"}}), ""]
    assert _judge(explicit, "x").kind == "failed"
    silent = ["data: " + json.dumps({"error": {}}), ""]
    assert _judge(silent, "x").kind == "lost"


def test_tokens_before_an_error_event_must_be_a_prefix_of_the_fault_free_text():
    words = [WordTokenizer(VOCAB).token_text(i) for i in TEXT.ids(PROMPT, 4)]
    error = ["data: " + json.dumps({"error": {"message": "main decode failed", "type": "upstream_error"}}), ""]
    honest = _judge(_events(words[:2], final=False, done=False) + error, "".join(words))
    assert honest.kind == "failed" and honest.message == "main decode failed"
    wrong = _judge(_events([words[1], words[0]], final=False, done=False) + error, "".join(words))
    assert wrong.kind == "corrupted" and "main decode failed" in wrong.message


def _outcome(send_s: float, kind: str = "completed", ttft_s: float = 0.1, done: bool = True) -> Outcome:
    outcome = Outcome(f"r{send_s}", "steady", kind=kind, send_s=send_s, ttft_s=ttft_s)
    outcome.end_s = send_s + 1 if done else float("inf")
    return outcome


def test_recovery_starts_where_the_last_unhealthy_request_ends():
    outcomes = [_outcome(t) for t in (1, 2, 3)] + [_outcome(10.5, "failed"), _outcome(11, ttft_s=9.0)]
    outcomes += [_outcome(12 + i) for i in range(8)]
    start, length = healthy_run_start(outcomes, 10, 100, bound_s=2.0, now_s=100)
    assert (start, length) == (12, 8)
    assert recovered_at(outcomes, 10, 100, 2.0, now_s=100, confirm_s=5) == 12
    assert recovered_at(outcomes, 10, 100, 2.0, now_s=14, confirm_s=5) is None  # not confirmed long enough
    pending = outcomes + [_outcome(19.5, done=False)]
    assert healthy_run_start(pending, 10, 100, 2.0, now_s=20)[0] == 12  # young and in flight: not yet unhealthy
    assert healthy_run_start(pending, 10, 100, 2.0, now_s=30)[0] is None  # in flight past the bound: unhealthy
    waiting = outcomes + [_outcome(19.5, ttft_s=None, done=False)]
    assert healthy_run_start(waiting, 10, 100, 2.0, now_s=20)[0] is None  # no first token yet: undecided


def test_baseline_bound_is_twice_p99_or_p99_plus_a_second():
    outcomes = [_outcome(float(t), ttft_s=0.1 * (t + 1)) for t in range(10)]
    baseline = Baseline.of(outcomes, 0, 10)
    assert baseline.throughput_rps == pytest.approx(1.0)
    assert baseline.ttft_p99_s == pytest.approx(percentile([0.1 * (t + 1) for t in range(10)], 0.99))
    assert baseline.ttft_bound_s == pytest.approx(max(2 * baseline.ttft_p99_s, baseline.ttft_p99_s + 1))


def test_chunked_body_waits_for_whole_chunks():
    body = ChunkedBody()
    wire = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    got = b"".join(body.feed(wire[i:i + 3]) for i in range(0, len(wire), 3))
    assert got == b"hello world" and body.ended


def test_jitter_schedule_is_valid_and_restores_the_link():
    up = {"delay": 0.005, "rate": 1e7, "queue": 67108, "jitter": 0.001}
    schedule = WanJitter((1, 20), hold_s=4, rate_drop_s=10).schedule(up)
    parsed = parse_schedule(json.dumps(schedule))
    assert [s.at for s in parsed.steps] == [0, 4, 8, 18]
    assert parsed.steps[1].up["queue"] >= 1e7 / 8 * 20  # the line stays busy through a 20 s delay
    assert parsed.steps[2].up == {"delay": 0.005, "rate": 1e6}
    assert parsed.steps[-1].up == up


def test_relay_scenarios_refuse_pd_cross_with_the_reason():
    assert not_applicable("kill-rld", "pdd") is None
    for name in ("kill-rld", "rld-overload"):
        assert "pdd only" in not_applicable(name, "pd-cross") and "no relay-decode tier" in not_applicable(name, "pd-cross")
    assert set(SCENARIOS) == {"wan-jitter", "wan-partition", "kill-md", "kill-rld", "kill-prefill", "rld-overload",
                              "slow-consumer", "hang", "fault-soak"}
    assert [name for name, s in SCENARIOS.items() if not s.in_ci] == ["fault-soak"]  # run by hand only


def test_a_request_the_next_fault_struck_does_not_count_against_this_recovery():
    outcomes = [_outcome(11 + i) for i in range(8)]
    struck = _outcome(19.5, "failed")  # sent before the next fault (at 20 s), ended by it
    struck.end_s = 20.2
    start, length = healthy_run_start(outcomes + [struck], 10, 20, 2.0, float("inf"), ended_by_s=20)
    assert (start, length) == (11, 8)
    assert healthy_run_start(outcomes + [struck], 10, 20, 2.0, float("inf"))[0] is None
