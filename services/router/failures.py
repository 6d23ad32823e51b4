"""How a failure reaches the client: `ApiError`, an OpenAI-style error, and the one mapping from a RoleError.

The pipelines fail with an ApiError; a peer's failure reaches them as a RoleError from the Peers
adapter (services/router/peers.py) and is mapped here, so no pipeline reads a wire status. A
failed call is named by its stage ("prefill failed: ...") and carries its status's name as
`code`, as the API has always reported it (docs/mesh.md §API conformance); a break on the
router's own side (a token feed: services/router/feed.py) carries no status and names itself.
"""

from __future__ import annotations

from typing import Any

from services.types import ErrorKind, RoleError

# A peer that could not serve (or was cancelled under the request) is worth another try: 503. Every
# kind not named here (a precondition, an unknown request, a defect) is the peer's failure: 502.
HTTP_STATUS = {
    ErrorKind.UNAVAILABLE: 503,
    ErrorKind.CANCELLED: 503,
    ErrorKind.DEADLINE: 504,
    ErrorKind.EXHAUSTED: 429,
    ErrorKind.INVALID: 400,
}


class ApiError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.kind, self.code, self.param = status, message, kind, code, param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def from_a_peer(exc: BaseException) -> bool:
    """Whether `exc` is a peer's answer to a call (it names the status), not a break on the router's side."""
    return isinstance(exc, RoleError) and exc.code is not None


def api_error(exc: RoleError, stage: str) -> ApiError:
    """`exc`, met at `stage` of a pipeline, as the client sees it."""
    status = HTTP_STATUS.get(exc.kind, 502)
    if exc.code is None:
        return ApiError(status, exc.message, kind="upstream_error")
    return ApiError(status, f"{stage} failed: {exc.message}", kind="upstream_error", code=exc.code)
