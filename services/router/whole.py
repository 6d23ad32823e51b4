"""Non-streamed answers: run every job of a request, then send one JSON body with all its choices."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from services.router.api import ApiError
from services.router.choices import Choice
from services.router.fanout import usage
from services.router.pipelines import Job, Token
from services.router.sse import response_id


async def _collect(router: Any, job: Job, choice: Choice, start: float) -> dict[str, Any]:
    last = start
    ttft = None
    async for item in router.run(job):
        now = time.monotonic()
        if isinstance(item, Token):
            (router.metrics.ttft if ttft is None else router.metrics.itl).observe(now - last)
            ttft = now - start if ttft is None else ttft
            last = now
            choice.add(item.token_id)
            continue
        router.metrics.e2e.observe(now - start)
        router.metrics.finished(item.pdd, len(job.prompt), len(choice.token_ids), choice.ending.finish_reason,
                                received_unix=job.received_unix, ttft_s=ttft, e2e_s=now - start)
        return item.pdd
    raise ApiError(502, "the pipeline ended without its stats", kind="upstream_error")


async def respond_whole(router: Any, request_id: str, pairs: list[tuple[Job, Choice]], chat: bool, n: int,
                        headers: dict[str, str]) -> web.Response:
    start = time.monotonic()
    jobs = [asyncio.ensure_future(_collect(router, job, choice, start)) for job, choice in pairs]
    try:
        async with asyncio.timeout(router.scenario.request_timeout_s):
            stats = await asyncio.gather(*jobs)
    except asyncio.CancelledError:  # the client hung up: gather cancels every job
        router.hung_up(request_id, sum(len(choice.token_ids) for _, choice in pairs))
        raise
    except Exception as exc:
        error = router.error_of(request_id, exc)
    else:
        router.completed += 1
        first = pairs[0][0]
        body = {"id": response_id(request_id, chat), "object": "chat.completion" if chat else "text_completion",
                "created": int(first.received_unix), "model": router.scenario.model,
                "choices": [choice.chat() if chat else choice.completion() for _, choice in pairs],
                "usage": usage(pairs, stats, n), "pdd": stats[0]}
        return web.json_response(body, headers=headers)
    finally:
        for task in jobs:  # one failed choice fails the request: stop the others' generation too
            task.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)  # and let them end before the answer goes out
    router.failed_with(request_id, error)
    return web.json_response(error.body(), status=error.status, headers=headers)
