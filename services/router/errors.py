"""OpenAI-shaped JSON errors for everything the HTTP layer refuses on its own.

Handlers raise `ApiError`; aiohttp itself raises `HTTPException`s for unknown
routes (404), wrong methods (405) and bodies past the size limit (413). The
middleware turns those into the same `{"error": {...}}` body OpenAI sends, so a
client's error path never meets a plain-text page.
"""

from __future__ import annotations

import logging

from aiohttp import web

from services.router.api import MAX_BODY_BYTES, ApiError

log = logging.getLogger(__name__)


def _as_api_error(request: web.Request, exc: web.HTTPException) -> ApiError:
    if exc.status == 404:
        return ApiError(404, f"Invalid URL ({request.method} {request.path})", code="not_found")
    if exc.status == 405:
        return ApiError(405, f"method {request.method} is not allowed on {request.path}", code="method_not_allowed")
    if exc.status == 413:
        return ApiError(413, f"request body exceeds {MAX_BODY_BYTES} bytes")
    kind = "server_error" if exc.status >= 500 else "invalid_request_error"
    return ApiError(exc.status, exc.text or exc.reason, kind=kind)


@web.middleware
async def json_errors(request: web.Request, handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        return web.json_response(exc.body(), status=exc.status)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        error = _as_api_error(request, exc)
        return web.json_response(error.body(), status=error.status, headers=headers)
    except Exception as exc:  # a defect: still a JSON error, never aiohttp's bare 500 page
        log.exception("%s %s failed inside the router", request.method, request.path)
        error = ApiError(500, f"internal router error ({type(exc).__name__})", kind="server_error")
        return web.json_response(error.body(), status=error.status)
