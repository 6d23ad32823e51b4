"""A request as jobs: one per (prompt, n) pair, in OpenAI's index order, each with its seed, id and ending."""

from __future__ import annotations

import asyncio
import json

import pytest
from prometheus_client import CollectorRegistry

from services.chaos.outcomes import fault_free_ids
from services.launcher.plan import build_plan
from services.router.api import ApiError, CompletionRequest
from services.router.chat_api import ChatRequest
from services.router.fanout import logprob_tokens, plan_jobs, usage
from services.router.pipelines import Finished, Token
from services.router.server import Router
from services.router.whole import respond_whole
from services.scenario import load_scenario


@pytest.fixture
def router() -> Router:
    return Router(build_plan(load_scenario("colocated-mini")), CollectorRegistry())


def _body(**fields) -> CompletionRequest:
    return CompletionRequest.model_validate({"model": "llama3-8b", "max_tokens": 6, **fields})


def test_a_batch_times_n_is_prompt_major_with_seeds_per_answer(router):
    pairs = plan_jobs(router, "r1", _body(prompt=["one two", "three"], n=2, seed=40), chat=False)
    assert [c.index for _, c in pairs] == [0, 1, 2, 3]
    assert [j.request_id for j, _ in pairs] == ["r1#0", "r1#1", "r1#2", "r1#3"]
    assert [j.seed for j, _ in pairs] == [40, 41, 40, 41]
    assert [c.prompt_text for _, c in pairs] == ["one two", "one two", "three", "three"]
    assert pairs[0][0].prompt.ids.tolist() == pairs[1][0].prompt.ids.tolist() != pairs[2][0].prompt.ids.tolist()


def test_one_prompt_keeps_the_request_id_and_the_scenario_seed(router):
    (job, choice), = plan_jobs(router, "r2", _body(prompt="alone"), chat=False)
    assert job.request_id == "r2" and job.seed == router.scenario.seed and job.max_tokens == 6
    assert choice.ending.finish_reason == "length"


def test_a_stop_token_shortens_what_the_mesh_is_asked_for(router):
    (whole, _), = plan_jobs(router, "r3", _body(prompt="stop soon", max_tokens=12), chat=False)
    ids = fault_free_ids(whole.prompt.ids, 12, whole.seed, router.tokenizer.vocab_size)
    (job, choice), = plan_jobs(router, "r3", _body(prompt="stop soon", max_tokens=12, stop_token_ids=[ids[4]]),
                               chat=False)
    assert job.max_tokens == ids.index(ids[4]) + 1 and choice.ending.stop_reason == ids[4]


def test_usage_counts_each_prompt_once_and_every_answer(router):
    pairs = plan_jobs(router, "r4", _body(prompt=["a b c", "d"], n=2), chat=False)
    for job, choice in pairs:
        for _ in range(job.max_tokens):
            choice.add(1)
    stats = [{"prefill_hit_tokens": 2}, {"prefill_hit_tokens": 3}, {"prefill_hit_tokens": 0}, {}]
    assert usage(pairs, stats, 2) == {"prompt_tokens": 4, "completion_tokens": 24, "total_tokens": 28,
                                      "prompt_tokens_details": {"cached_tokens": 2}}


async def test_a_failed_choice_fails_the_request_and_stops_the_others(router):
    stopped: list[str] = []

    async def run(job):
        try:
            if job.request_id.endswith("#1"):
                raise ApiError(502, "decode failed", kind="upstream_error")
            for position in range(job.max_tokens):
                yield Token(position, 5)
                if position == 2:
                    await asyncio.Event().wait()  # never set: only cancellation ends this job
            yield Finished({})
        finally:
            stopped.append(job.request_id)

    router.run = run
    pairs = plan_jobs(router, "r5", _body(prompt="x", n=2), chat=False)
    reply = await respond_whole(router, "r5", pairs, False, 2, {})
    assert reply.status == 502 and json.loads(reply.body)["error"]["message"] == "decode failed"
    assert sorted(stopped) == ["r5#0", "r5#1"] and router.failed == 1


def test_logprob_tokens_count_every_choices_output_and_echoed_prompt():
    assert logprob_tokens(_body(prompt=["a b c", "d"], n=3, echo=True, logprobs=2), chat=False) == 3 * (4 + 2 * 6)
    assert logprob_tokens(_body(prompt=[5, 6, 7], logprobs=0), chat=False) == 6  # no echo: the output only
    assert logprob_tokens(_body(prompt="a b", echo=True), chat=False) == 0  # no logprobs asked
    chat = ChatRequest.model_validate({"model": "llama3-8b", "messages": [{"role": "user", "content": "hi"}],
                                       "n": 3, "max_completion_tokens": 10, "logprobs": True})
    assert logprob_tokens(chat, chat=True) == 30
