"""A request as jobs: one per (prompt, n) pair, each with its stop ending and its `Choice`.

`prompt` may be a batch (a list of strings) and `n` asks for several answers
per prompt; every pair is its own job through the mesh, with its own request id
(`<id>-<index>` when there are several) and seed (`seed + j` for the j-th of n,
so the n answers differ, as sampled answers would). The jobs of one prompt
share its prefix, so the prefix caches serve the repeats.
"""

from __future__ import annotations

import time
from typing import Any

from services.engine.tokens import stream_key, token_at
from services.router.api import CompletionRequest
from services.router.chat_api import ChatRequest, chat_prompt
from services.router.choices import Choice, LogprobAsk
from services.router.pipelines import Job
from services.router.stops import StopRules, plan_ending


def _output_ids(job: Job, vocab_size: int):
    key = stream_key(job.fingerprint, job.seed)  # the job computed it once, for every service too
    return (token_at(key, i, vocab_size) for i in range(job.max_tokens))


def _ask(body: CompletionRequest | ChatRequest, chat: bool) -> LogprobAsk:
    if chat:
        return LogprobAsk(body.logprobs, body.top_logprobs or 0)
    return LogprobAsk(body.logprobs is not None, body.logprobs or 0, body.echo)


def plan_jobs(router: Any, request_id: str, body: CompletionRequest | ChatRequest, chat: bool,
              received_unix: float | None = None) -> list[tuple[Job, Choice]]:
    """Every job of the request with the choice it fills, in choice-index order."""
    received_unix = time.time() if received_unix is None else received_unix
    prompts = [chat_prompt(body.messages)] if chat else body.prompts()
    rules = StopRules(tuple(body.stop or ()), frozenset(body.stop_token_ids or ()), body.min_tokens)
    several = len(prompts) * body.n > 1
    ask = _ask(body, chat)
    base_seed = router.scenario.seed if body.seed is None else body.seed
    pairs = []
    for p, prompt in enumerate(prompts):
        for j in range(body.n):
            index = p * body.n + j
            job = router.job(f"{request_id}-{index}" if several else request_id, prompt, body.output_limit(),
                             (base_seed + j) % 2**32, received_unix)
            ending = plan_ending(_output_ids(job, router.tokenizer.vocab_size), job.max_tokens, rules,
                                 router.tokenizer)
            job.max_tokens = ending.length
            # an id prompt's text is only needed to echo it: decoding 61K ids costs more than their intake
            text = prompt if isinstance(prompt, str) else \
                router.tokenizer.decode(job.prompt.ids.tolist()) if ask.echo else ""
            pairs.append((job, Choice(index, text, job.prompt.ids, ending, router.tokenizer, ask)))
    return pairs


def usage(pairs: list[tuple[Job, Choice]], stats: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """OpenAI's usage: each prompt counted once, every choice's tokens; cached = the prefill's prefix hits."""
    firsts = range(0, len(pairs), n)
    prompt_tokens = sum(len(pairs[i][0].prompt) for i in firsts)
    completion_tokens = sum(len(choice.token_ids) for _, choice in pairs)
    cached = sum(stats[i].get("prefill_hit_tokens", 0) for i in firsts)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens, "prompt_tokens_details": {"cached_tokens": cached}}
