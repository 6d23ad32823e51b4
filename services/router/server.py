"""The router process: the OpenAI-compatible HTTP API in front of the mesh.

Streaming answers are Server-Sent Events, one token per chunk; the HTTP status
is decided when the first token (or the first error) is known, so a request
that fails before producing anything gets a real 4xx/5xx, and one that fails
later gets an SSE error event, never a silently truncated stream.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Any, AsyncIterator

from aiohttp import web
from prometheus_client import CollectorRegistry

from services.engine.tokens import WordTokenizer
from services.launcher.plan import MeshPlan, ServicePlan
from services.http_limits import HttpLimits, start_http
from services.observability import add_ops_routes, serve_until_signalled
from services.profiles import load_model
from services.router.api import (
    MAX_BODY_BYTES, ApiError, ChatRequest, CompletionRequest, chat_prompt, client_request_id, parse_body,
)
from services.router.metrics import RouterMetrics
from services.router.pipelines import Finished, Job, Peers, Token, pipeline_for

log = logging.getLogger(__name__)
ROUTER_KEY = web.AppKey("router", object)


class Router:
    def __init__(self, plan: MeshPlan, registry: CollectorRegistry) -> None:
        self.plan = plan
        self.scenario = plan.scenario
        self.model = load_model(plan.scenario.model)
        self.tokenizer = WordTokenizer(self.model.vocab_size)
        self.metrics = RouterMetrics(registry)
        self.peers: Peers | None = None
        self.inflight = 0
        self.active_ids: set[str] = set()
        self.completed = 0
        self.failed = 0
        self.cancelled = 0  # the client hung up before the end

    def job(self, request_id: str, prompt: str | list[int], max_tokens: int, seed: int | None) -> Job:
        # One token per whitespace piece: count them before hashing them all, so a prompt far past the
        # context is refused without holding the event loop for seconds.
        length = len(prompt.split()) if isinstance(prompt, str) else len(prompt)
        if length + max_tokens > self.model.max_context:
            raise ApiError(400, f"prompt ({length} tokens) plus max_tokens ({max_tokens}) exceeds the model's "
                                f"context of {self.model.max_context} tokens", code="context_length_exceeded")
        ids = self.tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
        if not ids:
            raise ApiError(400, "prompt has no tokens")
        if isinstance(prompt, list) and not all(0 <= t < self.model.vocab_size for t in ids):
            raise ApiError(400, f"prompt token ids must lie in 0..{self.model.vocab_size - 1}")
        return Job(request_id, ids, max_tokens, self.scenario.seed if seed is None else seed, time.time())

    async def run(self, job: Job) -> AsyncIterator[Token | Finished]:
        """The pipeline's output, checked: positions 0..max_tokens-1, each exactly once, in order."""
        expected = 0
        async for item in pipeline_for(self.scenario.mode)(self.peers, job, self.scenario.mode):
            if isinstance(item, Token):
                if item.position != expected:
                    raise ApiError(502, f"token stream out of order: got position {item.position}, "
                                        f"expected {expected}", kind="upstream_error")
                expected += 1
            elif expected != job.max_tokens:
                raise ApiError(502, f"stream ended after {expected} of {job.max_tokens} tokens", kind="upstream_error")
            yield item

    def stats(self) -> dict[str, Any]:
        return {"role": "router", "inflight": self.inflight, "completed": self.completed, "failed": self.failed,
                "cancelled": self.cancelled}


def _chunk(rid: str, created: int, model: str, text: str, chat: bool, finish: str | None = None) -> dict:
    if chat:
        choice = {"index": 0, "delta": {"content": text} if text else {}, "finish_reason": finish}
        return {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [choice]}
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    return {"id": rid, "object": "text_completion", "created": created, "model": model, "choices": [choice]}


def _sse(payload: dict | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


async def _handle(request: web.Request, chat: bool) -> web.StreamResponse:
    router: Router = request.app[ROUTER_KEY]
    headers: dict[str, str] = {}
    try:
        rid = client_request_id(request.headers.get("x-request-id") or None) or f"cmpl-{uuid.uuid4().hex[:24]}"
        headers["x-request-id"] = rid
        body = await parse_body(request, ChatRequest if chat else CompletionRequest)
        if body.model != router.scenario.model:
            raise ApiError(404, f"model {body.model!r} is not served here; this mesh serves {router.scenario.model!r}",
                           code="model_not_found")
        prompt = chat_prompt(body.messages) if chat else body.prompt
        max_tokens = (body.max_completion_tokens or body.max_tokens) if chat else body.max_tokens
        job = router.job(rid, prompt, max_tokens, body.seed)
        if rid in router.active_ids:  # two live requests under one id would share KV transfers
            raise ApiError(409, f"a request with x-request-id {rid} is already in flight; ids must be unique",
                           code="duplicate_request_id")
        if router.inflight >= router.scenario.max_inflight:
            raise ApiError(429, f"{router.inflight} requests in flight; the limit is {router.scenario.max_inflight}",
                           kind="rate_limit_error")
    except ApiError as exc:
        router.metrics.errors.labels(str(exc.status)).inc()
        return web.json_response(exc.body(), status=exc.status, headers=headers)
    except Exception as exc:  # a defect in checking the request: still a JSON error, not aiohttp's bare 500 page
        log.exception("request %s could not be read", headers.get("x-request-id", "(no id)"))
        router.metrics.errors.labels("500").inc()
        error = ApiError(500, f"internal router error ({type(exc).__name__})", kind="server_error")
        return web.json_response(error.body(), status=500, headers=headers)
    router.inflight += 1
    router.active_ids.add(rid)
    router.metrics.running.inc()
    try:
        return await _respond(request, router, job, body.stream, chat, headers)
    finally:
        router.inflight -= 1
        router.active_ids.discard(rid)
        router.metrics.running.dec()


async def _respond(request, router: Router, job: Job, stream: bool, chat: bool, headers) -> web.StreamResponse:
    created, model, tok = int(job.received_unix), router.scenario.model, router.tokenizer
    texts: list[str] = []
    response: web.StreamResponse | None = None
    last = time.monotonic()
    start = last
    try:
        async with asyncio.timeout(router.scenario.request_timeout_s):
            async for item in router.run(job):
                now = time.monotonic()
                if isinstance(item, Token):
                    text = tok.token_text(item.token_id)
                    (router.metrics.ttft if not texts else router.metrics.itl).observe(now - last)
                    last = now
                    texts.append(text)
                    if stream:
                        if response is None:
                            response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream",
                                                                   "Cache-Control": "no-cache"})
                            await response.prepare(request)
                        await response.write(_sse(_chunk(job.request_id, created, model, text, chat)))
                    continue
                usage = {"prompt_tokens": len(job.prompt), "completion_tokens": len(texts),
                         "total_tokens": len(job.prompt) + len(texts)}
                router.metrics.e2e.observe(now - start)
                router.metrics.finished(item.pdd, len(job.prompt), len(texts))
                router.completed += 1
                if not stream:
                    body = _chunk(job.request_id, created, model, "", chat, "length")
                    body["object"] = "chat.completion" if chat else "text_completion"
                    body["choices"][0] = ({"index": 0, "message": {"role": "assistant", "content": "".join(texts)},
                                           "finish_reason": "length"} if chat else
                                          {"index": 0, "text": "".join(texts), "logprobs": None,
                                           "finish_reason": "length"})
                    return web.json_response({**body, "usage": usage, "pdd": item.pdd}, headers=headers)
                final = _chunk(job.request_id, created, model, "", chat, "length")
                await response.write(_sse({**final, "usage": usage, "pdd": item.pdd}))
                await response.write(_sse("[DONE]"))
                return response
    except TimeoutError:
        error = ApiError(504, f"request not finished within {router.scenario.request_timeout_s:g} s",
                         kind="timeout_error")
    except ApiError as exc:
        error = exc
    except (ConnectionResetError, asyncio.CancelledError) as exc:
        # The client hung up (aiohttp cancels the handler when its connection closes, streamed or not):
        # leaving here cancels every stage's call in the pipelines' finally blocks, which frees the engines'
        # slots and KV and stops the transfers. Expected, so one INFO line and no traceback.
        router.cancelled += 1
        router.metrics.errors.labels("client_closed").inc()
        log.info("request %s cancelled: the client hung up after %d tokens", job.request_id, len(texts))
        if isinstance(exc, asyncio.CancelledError):
            raise
        return response if response is not None else web.Response(status=499)  # nobody reads it
    except Exception as exc:  # a defect here, not upstream: the client still gets an explicit error, not a cut stream
        log.exception("request %s failed inside the router", job.request_id)
        error = ApiError(500, f"internal router error ({type(exc).__name__})", kind="server_error")
    router.failed += 1
    router.metrics.errors.labels(str(error.status)).inc()
    log.warning("request %s failed: %s", job.request_id, error.message)
    if response is None:
        return web.json_response(error.body(), status=error.status, headers=headers)
    await response.write(_sse(error.body()))
    await response.write(_sse("[DONE]"))
    return response


async def completions(request: web.Request) -> web.StreamResponse:
    return await _handle(request, chat=False)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _handle(request, chat=True)


async def models(request: web.Request) -> web.Response:
    router: Router = request.app[ROUTER_KEY]
    entry = {"id": router.scenario.model, "object": "model", "created": 0, "owned_by": "pdd-emu",
             "max_model_len": router.model.max_context}
    return web.json_response({"object": "list", "data": [entry]})


def build_app(plan: MeshPlan) -> web.Application:
    registry = CollectorRegistry()
    router = Router(plan, registry)
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[ROUTER_KEY] = router
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", models)
    add_ops_routes(app, registry, router.stats)

    async def peers_ctx(_app: web.Application):
        router.peers = Peers(plan)
        yield
        await router.peers.close()

    app.cleanup_ctx.append(peers_ctx)
    return app


async def serve(plan: MeshPlan, service: ServicePlan) -> None:
    # Every request in flight holds a connection; twice the in-flight cap leaves room for idle keep-alives.
    limits = HttpLimits(max_connections=2 * plan.scenario.max_inflight + 64)
    runner, _ = await start_http(build_app(plan), service.listen_host, service.http_port, limits,
                                 shutdown_timeout=10.0, handler_cancellation=True)
    log.info("router listening on http://%s:%d (%s)", service.host, service.http_port, plan.scenario.mode.value)
    await serve_until_signalled(asyncio.Event())
    # SIGTERM: stop accepting, give in-flight requests the shutdown timeout to finish, then fail them.
    await runner.cleanup()
