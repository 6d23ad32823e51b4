"""A request as jobs: one per (prompt, n) pair, each with its stop ending and its `Choice`.

`prompt` may be a batch (a list of strings) and `n` asks for several answers
per prompt; every pair is its own job through the mesh, with its own request id
and seed (`seed + j` for the j-th of n, so the n answers differ, as sampled
answers would). A request of several jobs names them `<id>#<index>`: a client's
id cannot hold "#" (services/router/api.py REQUEST_ID), so no job of one request
can share an id with another request or its jobs. The jobs of one prompt share
its ids, tokenized once, and its prefix, so the prefix caches serve the repeats.

Planning is a sequence of steps (a prompt's intake, a slice of a stop scan), so
the server lets other requests run between them (`plan_jobs_yielding`) while the
simulation and tests take them all at once (`plan_jobs`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Iterator

from services.engine.tokens import stream_key, token_at
from services.router.api import CompletionRequest
from services.router.chat_api import ChatRequest, chat_prompt
from services.router.choices import Choice, LogprobAsk
from services.router.pipelines import Job
from services.router.stops import StopRules, StopScan

JOB_MARK = "#"  # between a request's id and a job's index; never in a client's id

Pairs = list[tuple[Job, Choice]]


def _output_ids(job: Job, vocab_size: int):
    key = stream_key(job.fingerprint, job.seed)  # the job computed it once, for every service too
    return (token_at(key, i, vocab_size) for i in range(job.max_tokens))


def _ask(body: CompletionRequest | ChatRequest, chat: bool) -> LogprobAsk:
    if chat:
        return LogprobAsk(body.logprobs, body.top_logprobs or 0)
    return LogprobAsk(body.logprobs is not None, body.logprobs or 0, body.echo)


def choices_of(body: CompletionRequest | ChatRequest, chat: bool) -> int:
    """The jobs a request asks for: its prompts x n."""
    return body.n * (1 if chat else len(body.prompts()))


def logprob_tokens(body: CompletionRequest | ChatRequest, chat: bool) -> int:
    """The tokens whose logprobs the answer carries: every choice's output, and its echoed prompt."""
    if chat:
        return body.n * body.output_limit() if body.logprobs else 0
    if body.logprobs is None:
        return 0
    prompts = body.prompts()
    # one token per whitespace piece (services/engine/tokens.py), counted without tokenizing
    echoed = sum(len(p.split()) if isinstance(p, str) else len(p) for p in prompts) if body.echo else 0
    return body.n * (echoed + len(prompts) * body.output_limit())


def job_id(request_id: str, index: int, jobs: int) -> str:
    return f"{request_id}{JOB_MARK}{index}" if jobs > 1 else request_id


def planning(router: Any, request_id: str, body: CompletionRequest | ChatRequest, chat: bool,
             received_unix: float, pairs: Pairs) -> Iterator[None]:
    """The steps of planning a request's jobs: each job, with the choice it fills, goes into `pairs` in index order."""
    prompts = [chat_prompt(body.messages)] if chat else body.prompts()
    rules = StopRules(tuple(body.stop or ()), frozenset(body.stop_token_ids or ()), body.min_tokens)
    ask, limit, jobs = _ask(body, chat), body.output_limit(), len(prompts) * body.n
    base_seed = router.scenario.seed if body.seed is None else body.seed
    for p, prompt in enumerate(prompts):
        ids = router.prompt_ids(prompt, limit)
        # an id prompt's text is only needed to echo it: decoding 61K ids costs more than their intake
        text = prompt if isinstance(prompt, str) else router.tokenizer.decode(ids.ids.tolist()) if ask.echo else ""
        fingerprint = None
        for j in range(body.n):
            index = p * body.n + j
            job = router.job(job_id(request_id, index, jobs), ids, limit, (base_seed + j) % 2**32, received_unix,
                             fingerprint)
            fingerprint = job.fingerprint
            scan = StopScan(_output_ids(job, router.tokenizer.vocab_size), limit, rules, router.tokenizer)
            while not scan.advance():
                yield
            job.max_tokens = scan.ending.length
            pairs.append((job, Choice(index, text, ids.ids, scan.ending, router.tokenizer, ask)))
        yield


def plan_jobs(router: Any, request_id: str, body: CompletionRequest | ChatRequest, chat: bool,
              received_unix: float | None = None) -> Pairs:
    """Every job of the request with the choice it fills, planned at once."""
    pairs: Pairs = []
    for _ in planning(router, request_id, body, chat, time.time() if received_unix is None else received_unix, pairs):
        pass
    return pairs


async def plan_jobs_yielding(router: Any, request_id: str, body: CompletionRequest | ChatRequest, chat: bool,
                             received_unix: float) -> Pairs:
    """plan_jobs, letting the event loop run between steps: a long plan never stalls other requests."""
    pairs: Pairs = []
    for _ in planning(router, request_id, body, chat, received_unix, pairs):
        await asyncio.sleep(0)
    return pairs


def usage(pairs: Pairs, stats: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """OpenAI's usage: each prompt counted once, every choice's tokens; cached = the prefill's prefix hits."""
    firsts = range(0, len(pairs), n)
    prompt_tokens = sum(len(pairs[i][0].prompt) for i in firsts)
    completion_tokens = sum(len(choice.token_ids) for _, choice in pairs)
    cached = sum(stats[i].get("prefill_hit_tokens", 0) for i in firsts)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens, "prompt_tokens_details": {"cached_tokens": cached}}
