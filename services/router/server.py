"""The router process: the OpenAI-compatible HTTP API in front of the mesh.

Streaming answers are Server-Sent Events, one token per chunk; the HTTP status
is decided when the first token (or the first error) is known, so a request
that fails before producing anything gets a real 4xx/5xx, and one that fails
later gets an SSE error event, never a silently truncated stream.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any, AsyncIterator

import numpy as np
from aiohttp import web
from prometheus_client import CollectorRegistry

from services.engine.tokens import WordTokenizer
from services.scenario.plan import MeshPlan, ServicePlan
from services.http_limits import HttpLimits, start_http
from services.observability import add_ops_routes, serve_until_signalled
from services.profiles import load_model
from services.roles import token_count
from services.router.api import MAX_BODY_BYTES, ApiError, CompletionRequest, client_request_id, parse_body
from services.router.chat_api import ChatRequest
from services.router.choices import MAX_LOGPROB_TOKENS
from services.router.dashboard.routes import add_dashboard
from services.router.errors import json_errors
from services.router.fanout import choices_of, logprob_tokens, plan_jobs_yielding
from services.router.fanout_stream import stream_choices
from services.router.intake import PromptIds, checked_ids
from services.router.metrics import RouterMetrics
from services.router.outcomes import RequestOutcomes
from services.router.peers import Peers
from services.router.pipelines import Finished, Job, Token, pipeline_for
from services.router.stream_one import stream_one
from services.router.tokenize_api import detokenize, server_version, tokenize
from services.router.whole import respond_whole

log = logging.getLogger(__name__)
ROUTER_KEY = web.AppKey("router", object)


class Router(RequestOutcomes):
    def __init__(self, plan: MeshPlan, registry: CollectorRegistry) -> None:
        self.plan = plan
        self.scenario = plan.scenario
        self.model = load_model(plan.scenario.model)
        # Words and their JSON literals are made on first use and remembered (WordTokenizer.token_text,
        # sse.text_json): a router builds only what it streams, not the whole vocabulary at start.
        self.tokenizer = WordTokenizer(self.model.vocab_size)
        self.metrics = RouterMetrics(registry, plan.scenario.model, plan.scenario.wan.rate_bps,
                                     self.model.max_context)
        self.peers: Peers | None = None
        self.inflight = 0
        self.active_ids: set[str] = set()
        self.completed = 0
        self.failed = 0
        self.cancelled = 0  # the client hung up before the end

    def prompt_ids(self, prompt: str | np.ndarray, max_tokens: int) -> PromptIds:
        """A prompt's checked ids, or the 400 that says why it cannot be served."""
        # At least one token per whitespace piece: count them before encoding them all, so a prompt far past
        # the context is refused without holding the event loop for seconds; then its exact length.
        self._within_context(len(prompt.split()) if isinstance(prompt, str) else len(prompt), max_tokens)
        try:
            ids = PromptIds.of(self.tokenizer.encode(prompt)) if isinstance(prompt, str) else \
                checked_ids(prompt, self.tokenizer.size)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from exc
        self._within_context(len(ids), max_tokens)
        if not len(ids):
            raise ApiError(400, "prompt has no tokens")
        return ids

    def job(self, request_id: str, prompt: PromptIds, max_tokens: int, seed: int | None, received_unix: float,
            fingerprint: int | None = None) -> Job:
        """A job for checked ids; `fingerprint`, when the prompt's is known, saves hashing it again."""
        job = Job(request_id, prompt, max_tokens, self.scenario.seed if seed is None else seed, received_unix,
                  fingerprint=fingerprint)
        job.timeline["received"] = received_unix  # intake (received to prefill_sent) shows in every response
        return job

    def _within_context(self, length: int, max_tokens: int) -> None:
        if length + max_tokens > self.model.max_context:
            raise ApiError(400, f"prompt ({length} tokens) plus max_tokens ({max_tokens}) exceeds the model's "
                                f"context of {self.model.max_context} tokens", code="context_length_exceeded")

    async def run(self, job: Job) -> AsyncIterator[Token | Finished]:
        """The pipeline's output, checked: positions 0..max_tokens-1, each exactly once, in order."""
        expected = 0
        self.metrics.waiting.inc()  # until its first token; then running (vLLM's scheduler states)
        try:
            async for item in pipeline_for(self.scenario.mode)(self.peers, job, self.scenario.mode):
                if token_count(item):
                    if expected == 0:
                        self.metrics.waiting.dec()
                        self.metrics.running.inc()
                    for token in (item,) if type(item) is Token else item:
                        if token.position != expected:
                            raise ApiError(502, f"token stream out of order: got position {token.position}, "
                                                f"expected {expected}", kind="upstream_error")
                        expected += 1
                elif expected != job.max_tokens:
                    raise ApiError(502, f"stream ended after {expected} of {job.max_tokens} tokens",
                                   kind="upstream_error")
                yield item
        finally:
            (self.metrics.running if expected else self.metrics.waiting).dec()

    def stats(self) -> dict[str, Any]:
        feeds = list(self.peers.feeds.values()) if self.peers is not None else []
        return {"role": "router", "inflight": self.inflight, "completed": self.completed, "failed": self.failed,
                "cancelled": self.cancelled,
                "token_feed": {"messages": sum(f.messages for f in feeds), "tokens": sum(f.tokens for f in feeds)},
                "prompt_resends": dict(self.peers.resends.by_service) if self.peers is not None else {}}


def _refusal(router: Router, exc: Exception, headers: dict[str, str]) -> web.Response:
    """The JSON error of a request refused before its answer began: its ApiError, or a defect in checking it."""
    if not isinstance(exc, ApiError):  # still a JSON error, not aiohttp's bare 500 page
        log.error("request %s could not be read", headers.get("x-request-id", "(no id)"), exc_info=exc)
        exc = ApiError(500, f"internal router error ({type(exc).__name__})", kind="server_error")
    router.metrics.errors.labels(str(exc.status)).inc()
    return web.json_response(exc.body(), status=exc.status, headers=headers)


def _admit(router: Router, rid: str, body: CompletionRequest | ChatRequest, chat: bool) -> int:
    """The jobs of a request within every bound, before any work on them; each refusal names its limit."""
    cap, jobs, rows = router.scenario.max_inflight, choices_of(body, chat), logprob_tokens(body, chat)
    if jobs > cap:
        raise ApiError(400, f"the request asks for {jobs} choices (prompts x n); this router runs at most "
                            f"{cap} jobs at once (max_inflight)", param="n", code="too_many_choices")
    if rows > MAX_LOGPROB_TOKENS:
        raise ApiError(400, f"the answer would carry logprobs for {rows} tokens (echoed prompts and max_tokens, "
                            f"over {jobs} choices); a request may ask for at most {MAX_LOGPROB_TOKENS}",
                       param="logprobs")
    if rid in router.active_ids:  # two live requests under one id would share KV transfers
        raise ApiError(409, f"a request with x-request-id {rid} is already in flight; ids must be unique",
                       code="duplicate_request_id")
    if router.inflight + jobs > cap:
        raise ApiError(429, f"{router.inflight} jobs in flight and this request asks for {jobs}; the limit is "
                            f"{cap} (max_inflight)", kind="rate_limit_error")
    return jobs


async def _handle(request: web.Request, chat: bool) -> web.StreamResponse:
    received_unix = time.time()  # the headers are in; the body may still be arriving
    router: Router = request.app[ROUTER_KEY]
    headers: dict[str, str] = {}
    try:
        rid = client_request_id(request.headers.get("x-request-id") or None) or uuid.uuid4().hex[:24]
        headers["x-request-id"] = rid
        body = await parse_body(request, ChatRequest if chat else CompletionRequest,
                                {"vocab_size": router.tokenizer.size})
        if body.model != router.scenario.model:
            raise ApiError(404, f"model {body.model!r} is not served here; this mesh serves {router.scenario.model!r}",
                           code="model_not_found")
        jobs = _admit(router, rid, body, chat)
    except Exception as exc:  # noqa: BLE001 - every refusal is answered, a defect's with its traceback logged
        return _refusal(router, exc, headers)
    # The request holds its jobs' share of the in-flight cap and its id from here, through its planning.
    router.inflight += jobs
    router.active_ids.add(rid)
    try:
        try:
            pairs = await plan_jobs_yielding(router, rid, body, chat, received_unix)
        except asyncio.CancelledError:  # the client hung up while its jobs were planned
            router.hung_up(rid, 0)
            raise
        except Exception as exc:  # noqa: BLE001 - as above: a prompt past the context, or a defect
            return _refusal(router, exc, headers)
        if not body.stream:
            return await respond_whole(router, rid, pairs, chat, body.n, headers)
        usage = body.stream_options is not None and body.stream_options.include_usage
        continuous = usage and body.stream_options.continuous_usage_stats  # only with include_usage, as vLLM
        if len(pairs) > 1:
            return await stream_choices(request, router, rid, pairs, chat, body.n, headers, usage, continuous)
        return await stream_one(request, router, pairs[0][0], pairs[0][1], chat, headers, usage, continuous)
    finally:
        router.inflight -= jobs
        router.active_ids.discard(rid)


async def completions(request: web.Request) -> web.StreamResponse:
    return await _handle(request, chat=False)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _handle(request, chat=True)


def _model_entry(router: Router) -> dict:
    return {"id": router.scenario.model, "object": "model", "created": 0, "owned_by": "pdd-emu",
            "max_model_len": router.model.max_context}


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [_model_entry(request.app[ROUTER_KEY])]})


async def model(request: web.Request) -> web.Response:
    router: Router = request.app[ROUTER_KEY]
    if request.match_info["model"] != router.scenario.model:
        raise ApiError(404, f"The model {request.match_info['model']!r} does not exist", code="model_not_found",
                       param="model")
    return web.json_response(_model_entry(router))


def build_app(plan: MeshPlan) -> web.Application:
    registry = CollectorRegistry()
    router = Router(plan, registry)
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[json_errors])
    app[ROUTER_KEY] = router
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/v1/models/{model}", model)
    app.router.add_post("/tokenize", lambda request: tokenize(request, router))
    app.router.add_post("/detokenize", lambda request: detokenize(request, router))
    app.router.add_get("/version", server_version)
    add_ops_routes(app, registry, router.stats)
    add_dashboard(app, router)

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
