"""How a request ends at the router, counted once for streamed and whole answers alike.

Completed, failed with an explicit error, or cancelled because the client hung up: each outcome
moves its counter in `/stats`, its label of `pdd_request_errors` in /metrics, and writes one log
line (docs/reliability.md, "Hang-ups").
"""

from __future__ import annotations

import logging

from aiohttp import web

from services.router.api import ApiError
from services.router.sse import DONE, error_event

log = logging.getLogger(__name__)


class RequestOutcomes:
    """The router's outcome accounting; the router holds the counters, `metrics` and `scenario`."""

    completed: int
    failed: int
    cancelled: int

    def hung_up(self, request_id: str, tokens: int) -> None:
        """The client closed its connection before its answer was whole, streamed or not.

        aiohttp cancels the handler when the connection closes; leaving the pipeline cancels every stage's
        call in the pipelines' finally blocks, which frees the engines' slots and KV and stops the
        transfers. Expected, so one INFO line and no traceback.
        """
        self.cancelled += 1
        self.metrics.errors.labels("client_closed").inc()
        log.info("request %s cancelled: the client hung up after %d tokens", request_id, tokens)

    def error_of(self, request_id: str, exc: Exception) -> ApiError:
        """The explicit error a request that raised `exc` ends with: its deadline, the mesh's, or a defect here.

        Called inside the `except` block, so a defect's traceback is logged with it.
        """
        if isinstance(exc, TimeoutError):
            return ApiError(504, f"request not finished within {self.scenario.request_timeout_s:g} s",
                            kind="timeout_error")
        if isinstance(exc, ApiError):
            return exc
        # a defect here, not upstream: the client still gets an explicit error, not a cut stream
        log.exception("request %s failed inside the router", request_id)
        return ApiError(500, f"internal router error ({type(exc).__name__})", kind="server_error")

    def failed_with(self, request_id: str, error: ApiError) -> None:
        """A request that ends with an explicit error, before its answer began or as its last SSE event."""
        self.failed += 1
        self.metrics.errors.labels(str(error.status)).inc()
        log.warning("request %s failed: %s", request_id, error.message)

    async def answer_failure(self, request_id: str, error: ApiError, response: web.StreamResponse | None,
                             headers: dict[str, str]) -> web.StreamResponse:
        """A stream's failure: a real status before its first chunk, an SSE error event (then DONE) after."""
        self.failed_with(request_id, error)
        if response is None:
            return web.json_response(error.body(), status=error.status, headers=headers)
        await response.write(error_event(error.body()))
        await response.write(DONE)
        return response
