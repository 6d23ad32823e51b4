"""One streamed completion sent to the in-process router, measured as `pdd-emu bench` measures it.

The bench client POSTs `{"prompt", "max_tokens", "stream": true}` and reads the
SSE stream (loadgen/bench/client.py). Here the same body goes through the
router's own checks (`CompletionRequest`, `plan_jobs`, the in-flight cap), its
pipeline (`Router.run`), and the router's own chunk encoder; the bench's own
SSE decoder and `StreamTally` read those bytes at the loop's time. So the
record, its text and its `pdd` object are what the bench would have written,
with every time on the simulation's clock.
"""

from __future__ import annotations

import asyncio
import time

from pydantic import ValidationError

from loadgen.bench.client import fill_measurements
from loadgen.bench.records import RequestRecord
from loadgen.plan import RequestPlan
from loadgen.sse import SseLineDecoder, StreamError, StreamTally
from loadgen.tokens import text_token_ids
from services.roles import token_count
from services.router.api import ApiError, CompletionRequest
from services.router.fanout import plan_jobs
from services.router.pipelines import Token
from services.router.server import Router
from services.router.sse import DONE, ChunkEncoder, error_event


def _feed(tally: StreamTally, decoder: SseLineDecoder, chunk: bytes, now: float) -> None:
    for line in chunk.decode().split("\n"):
        data = decoder.feed(line)
        if data is not None:
            tally.feed_event(data, now)


async def _stream(router: Router, plan: RequestPlan, tally: StreamTally, record: RequestRecord,
                  through_bytes: bool) -> None:
    """The router's side of one streamed request (services/router/server.py `_handle`, services/router/stream_one.py)."""
    loop, scenario = asyncio.get_running_loop(), router.scenario
    received_unix = time.time()
    # The ids as the router's body parser would leave them: an int64 array (services/router/intake.py).
    prompt = plan.prompt if plan.prompt_array is None else plan.prompt_array
    payload = {"model": scenario.model, "prompt": prompt, "max_tokens": plan.max_tokens, "stream": True}
    try:
        body = CompletionRequest.model_validate(payload, context={"vocab_size": router.model.vocab_size})
    except ValidationError as exc:
        raise ApiError(400, str(exc.errors()[0]["msg"])) from exc
    job, choice = plan_jobs(router, plan.request_id, body, False, received_unix)[0]
    if router.inflight >= scenario.max_inflight:
        raise ApiError(429, f"{router.inflight} requests in flight; the limit is {scenario.max_inflight}",
                       kind="rate_limit_error")
    record.http_status = 200
    chunks = ChunkEncoder(job.request_id, int(job.received_unix), scenario.model, False)
    decoder, produced = SseLineDecoder(), 0
    router.inflight += 1
    try:
        async with asyncio.timeout(scenario.request_timeout_s):
            async for item in router.run(job):
                if token_count(item):
                    # A token's chunk carries only its text, and the tally reads a text's ids as
                    # feed_event would: a whole word is its own id (loadgen/tokens.py), a cut one is
                    # decoded. The chunks with more in them go through the SSE bytes below. Each
                    # token counts at the time it reached the router (`Token.t`).
                    for token in (item,) if type(item) is Token else item:
                        text = choice.add(token.token_id)
                        produced += 1
                        if through_bytes:
                            if text:
                                _feed(tally, decoder, chunks.token(text, first=produced == 1), token.t)
                        elif text:
                            tally.ended_at = token.t
                            tally.add_tokens((token.token_id,) if text is choice.pieces[-1] else
                                             text_token_ids(text, tally.vocab), token.t)
                    continue
                router.completed += 1
                now = loop.time()
                _feed(tally, decoder, chunks.finish(choice.ending.finish_reason, item.pdd), now)
                _feed(tally, decoder, chunks.usage(len(job.prompt), produced, item.pdd.get("prefill_hit_tokens", 0)),
                      now)
                _feed(tally, decoder, DONE, now)
                return
    except TimeoutError:
        error = ApiError(504, f"request not finished within {scenario.request_timeout_s:g} s", kind="timeout_error")
    except ApiError as exc:
        error = exc
    finally:
        router.inflight -= 1
    router.failed += 1
    if not produced:
        raise error
    _feed(tally, decoder, error_event(error.body()), loop.time())


async def complete(router: Router, plan: RequestPlan, *, timeout_s: float, send_s: float,
                   vocab: int, through_bytes: bool = False) -> tuple[RequestRecord, list[int]]:
    """Send the plan to the router; its record and the output token ids (loadgen's stream_completion).

    `through_bytes`: every token's chunk is encoded and read back as the bench reads it, not only
    the chunks with more than a text in them (the same records, slower: what holds the two alike).
    """
    loop = asyncio.get_running_loop()
    record = RequestRecord.sent(plan, send_s)
    tally = StreamTally(sent_at=loop.time(), vocab=vocab)
    try:
        async with asyncio.timeout(timeout_s):
            await _stream(router, plan, tally, record, through_bytes)
        tally.check_complete()
    except TimeoutError:
        record.status, record.error = "timeout", f"no complete answer within {timeout_s:g}s"
    except ApiError as error:
        record.http_status = error.status
        record.status, record.error = "error", f"http_{error.status}: HTTP {error.status}: {error.message}"
    except StreamError as error:
        record.status, record.error = "error", f"{error.code}: {error}"
    except asyncio.CancelledError:
        record.status, record.error = "cancelled", "run interrupted"
    fill_measurements(record, tally)
    record.elapsed_s = loop.time() - tally.sent_at
    return record, tally.output_ids
