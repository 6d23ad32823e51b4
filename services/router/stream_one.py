"""A streamed answer of one choice: SSE chunks, one per token, written as each token arrives.

The HTTP status is decided when the first token (or the first error) is known
(services/router/server.py); after that a failure is an SSE error event. The
inter-token gaps go to the histogram in batches (GapHistogram, docs/mesh.md §Metrics).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from services.router.choices import Choice
from services.router.pipelines import Job, Token
from services.router.sse import DONE, ChunkEncoder


async def stream_one(request: web.Request, router: Any, job: Job, choice: Choice, chat: bool, headers,
                     include_usage: bool = False, continuous_usage: bool = False) -> web.StreamResponse:
    """A streamed answer; `choice` cuts the text at its stop and supplies logprobs when asked."""
    created, metrics = int(job.received_unix), router.metrics
    chunks = ChunkEncoder(job.request_id, created, router.scenario.model, chat,
                          usage_prompt=len(job.prompt) if continuous_usage else None)
    response: web.StreamResponse | None = None
    last = time.monotonic()
    start, ttft = last, None
    gaps: list[float] = []  # inter-token gaps, handed to the histogram in batches (GapHistogram)
    try:
        async with asyncio.timeout(router.scenario.request_timeout_s):
            async for item in router.run(job):
                now = time.monotonic()
                if type(item) is Token:
                    text = choice.add(item.token_id)
                    first = len(choice.token_ids) == 1
                    if not first:
                        gaps.append(now - last)
                        if len(gaps) >= metrics.itl.FLUSH_GAPS:
                            metrics.itl.observe_many(gaps)
                            gaps.clear()
                    else:
                        metrics.ttft.observe(now - last)
                        ttft = now - start
                    last = now
                    if response is None:
                        response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream",
                                                               "Cache-Control": "no-cache"})
                        await response.prepare(request)
                        if choice.ask.echo:
                            await response.write(chunks.counted(chunks.token(choice.prompt_text), 0))
                    if choice.ask.wanted:
                        await response.write(chunks.counted(
                            chunks.token_logprobs(text, choice.last_logprobs(chat), first), len(choice.token_ids)))
                    elif text or first:  # past a stop the tokens have no text to send
                        await response.write(chunks.counted(chunks.token(text, first=first), len(choice.token_ids)))
                    continue
                metrics.e2e.observe(now - start)
                metrics.finished(item.pdd, len(job.prompt), len(choice.token_ids), choice.ending.finish_reason,
                                 received_unix=job.received_unix, ttft_s=ttft, e2e_s=now - start)
                router.completed += 1
                await response.write(chunks.counted(chunks.finish(choice.ending.finish_reason, item.pdd), len(choice.token_ids)))
                if include_usage:
                    await response.write(chunks.usage(len(job.prompt), len(choice.token_ids),
                                                      item.pdd.get("prefill_hit_tokens", 0)))
                await response.write(DONE)
                return response
    except (ConnectionResetError, asyncio.CancelledError) as exc:
        router.hung_up(job.request_id, len(choice.token_ids))
        if isinstance(exc, asyncio.CancelledError):
            raise
        return response if response is not None else web.Response(status=499)  # nobody reads it
    except Exception as exc:
        error = router.error_of(job.request_id, exc)
    finally:
        metrics.itl.observe_many(gaps)
    return await router.answer_failure(job.request_id, error, response, headers)
