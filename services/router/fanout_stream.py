"""A streamed answer with several choices (`n` > 1, or a batch `prompt`), in vLLM's stream shape.

Every job of the request runs at once (services/router/fanout.py); their tokens
go out as they come, each chunk naming its choice's `index`, so the choices'
chunks interleave. Each choice ends with its own finishing chunk; usage (only
with `stream_options.include_usage`) comes once, after every choice, in a
chunk whose `choices` is empty; then `data: [DONE]`. The HTTP status is decided
by the first token of any choice: a request that fails before one gets a real
4xx/5xx, and one failing later gets an SSE error event and the other choices
are stopped. One choice, the common case, keeps the direct path in server.py.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from services.router.choices import Choice
from services.router.fanout import usage
from services.router.pipelines import Job, Token
from services.router.sse import DONE, ChunkEncoder


class _Lane:
    """One choice's share of the stream: its chunks, its timing for the histograms."""

    def __init__(self, job: Job, choice: Choice, chunks: ChunkEncoder, start: float) -> None:
        self.job, self.choice, self.chunks = job, choice, chunks
        self.start = self.last = start
        self.ttft: float | None = None
        self.stats: dict[str, Any] = {}

    def token(self, router: Any, token_id: int, now: float, chat: bool) -> bytes:
        """The bytes of this choice's next token (and, first, its echoed prompt); times it."""
        text = self.choice.add(token_id)
        first = self.ttft is None
        (router.metrics.ttft if first else router.metrics.itl).observe(now - self.last)
        self.last = now
        out, count = b"", len(self.choice.token_ids)
        if first:
            self.ttft = now - self.start
            if self.choice.ask.echo:
                out = self.chunks.counted(self.chunks.token(self.choice.prompt_text), 0)
        if self.choice.ask.wanted:
            return out + self.chunks.counted(
                self.chunks.token_logprobs(text, self.choice.last_logprobs(chat), first), count)
        return out + self.chunks.counted(self.chunks.token(text, first=first), count) if text or first else out

    def finish(self, router: Any, pdd: dict[str, Any], now: float) -> bytes:
        self.stats = pdd
        tokens = len(self.choice.token_ids)
        router.metrics.e2e.observe(now - self.start)
        router.metrics.finished(pdd, len(self.job.prompt), tokens, self.choice.ending.finish_reason,
                                received_unix=self.job.received_unix, ttft_s=self.ttft, e2e_s=now - self.start)
        return self.chunks.counted(self.chunks.finish(self.choice.ending.finish_reason, pdd), tokens)


async def _pump(router: Any, index: int, job: Job, inbox: asyncio.Queue) -> None:
    """One job's pipeline output into the request's inbox, as (index, item); its failure too."""
    try:
        async for item in router.run(job):
            inbox.put_nowait((index, item))
    except Exception as exc:  # noqa: BLE001 - handed to the writer, which answers it
        inbox.put_nowait((index, exc))


async def stream_choices(request: web.Request, router: Any, request_id: str, pairs: list[tuple[Job, Choice]],
                         chat: bool, n: int, headers: dict[str, str], include_usage: bool,
                         continuous_usage: bool = False) -> web.StreamResponse:
    start = time.monotonic()
    created, model = int(pairs[0][0].received_unix), router.scenario.model
    lanes = [_Lane(job, choice, ChunkEncoder(request_id, created, model, chat, choice.index,
                                             len(job.prompt) if continuous_usage else None), start)
             for job, choice in pairs]
    inbox: asyncio.Queue = asyncio.Queue()
    pumps = [asyncio.ensure_future(_pump(router, i, job, inbox)) for i, (job, _) in enumerate(pairs)]
    response: web.StreamResponse | None = None
    try:
        async with asyncio.timeout(router.scenario.request_timeout_s):
            open_lanes = len(lanes)
            while open_lanes:
                index, item = await inbox.get()
                if isinstance(item, Exception):
                    raise item
                lane, now = lanes[index], time.monotonic()
                if response is None:  # the first token of any choice: the answer is a 200 stream
                    response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream",
                                                           "Cache-Control": "no-cache"})
                    await response.prepare(request)
                if type(item) is Token:
                    chunk = lane.token(router, item.token_id, now, chat)
                else:  # the job's Finished: its choice is whole
                    chunk = lane.finish(router, item.pdd, now)
                    open_lanes -= 1
                if chunk:
                    await response.write(chunk)
            router.completed += 1
            if include_usage:
                counts = usage(pairs, [lane.stats for lane in lanes], n)
                await response.write(lanes[0].chunks.usage(counts["prompt_tokens"], counts["completion_tokens"],
                                                           counts["prompt_tokens_details"]["cached_tokens"]))
            await response.write(DONE)
            return response
    except (ConnectionResetError, asyncio.CancelledError) as exc:
        router.hung_up(request_id, sum(len(lane.choice.token_ids) for lane in lanes))
        if isinstance(exc, asyncio.CancelledError):
            raise
        return response if response is not None else web.Response(status=499)  # nobody reads it
    except Exception as exc:
        error = router.error_of(request_id, exc)
    finally:
        for pump in pumps:  # one failed choice fails the request: stop the others' generation too
            pump.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
    return await router.answer_failure(request_id, error, response, headers)
