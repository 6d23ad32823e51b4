"""Request validation for the OpenAI-compatible API and OpenAI-style error bodies.

Known OpenAI fields are type-checked; fields this emulator ignores (sampling
parameters) are accepted so unmodified clients work. `max_tokens` is the exact
output length: the emulated model emits no early end-of-sequence.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError, field_validator

# A 128K-token prompt is about 1 MiB as JSON ids or as text; the cap keeps the worst body's parse (and the
# router's event loop stall) to tens of ms, and aiohttp refuses more while reading, before any parsing.
MAX_BODY_BYTES = 4 * 1024 * 1024
BODY_READ_S = 30.0  # a body that trickles in slower than this is refused (408), its connection freed
# A request id names the request's KV transfers and rides in gRPC metadata and KV frame headers on
# every hop, so it must be short plain ASCII; "/" is left out because internal ids append "/handoff".
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class ApiError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.kind, self.code = status, message, kind, code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": None, "code": self.code}}

    def response(self) -> web.Response:
        return web.json_response(self.body(), status=self.status)


class _Common(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str
    max_tokens: StrictInt = Field(16, ge=1)
    stream: StrictBool = False
    seed: StrictInt | None = Field(None, ge=0, lt=2**32)
    n: StrictInt = Field(1, ge=1, le=1)
    temperature: float | None = None
    top_p: float | None = None
    user: str | None = None


def _unicode(text: str, what: str) -> str:
    """JSON may carry lone surrogates ("\\ud800"); they are not text, and no tokenizer can encode them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid Unicode text (it holds a lone surrogate)") from None
    return text


class CompletionRequest(_Common):
    prompt: str | list[StrictInt]

    @field_validator("prompt")
    @classmethod
    def _not_empty(cls, v):
        if (isinstance(v, str) and not v.strip()) or (isinstance(v, list) and not v):
            raise ValueError("prompt is empty")
        return _unicode(v, "prompt") if isinstance(v, str) else v


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str

    @field_validator("content")
    @classmethod
    def _text(cls, v):
        return _unicode(v, "content")


class ChatRequest(_Common):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: StrictInt | None = Field(None, ge=1)


def _first_problem(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "body"
    return f"{where}: {err['msg']}"


async def parse_body(request: web.Request, schema: type[BaseModel]) -> BaseModel:
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise ApiError(413, f"request body of {request.content_length} bytes exceeds {MAX_BODY_BYTES}")
    try:
        async with asyncio.timeout(BODY_READ_S):
            await request.read()
        data = await request.json()
    except TimeoutError as exc:
        raise ApiError(408, f"request body not received within {BODY_READ_S:g} s") from exc
    except web.HTTPRequestEntityTooLarge as exc:
        raise ApiError(413, f"request body exceeds {MAX_BODY_BYTES} bytes") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"body is not valid JSON: {exc}") from exc
    except RecursionError as exc:  # json.loads recurses once per nesting level
        raise ApiError(400, "body is not valid JSON: nested too deeply") from exc
    if not isinstance(data, dict):
        raise ApiError(400, f"body must be a JSON object, got {type(data).__name__}")
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise ApiError(400, _first_problem(exc)) from exc


def client_request_id(value: str | None) -> str | None:
    """The caller's x-request-id if it is usable as ours; a 400 otherwise."""
    if value is None:
        return None
    if not REQUEST_ID.fullmatch(value):
        raise ApiError(400, "x-request-id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -",
                       code="invalid_request_id")
    return value


def chat_prompt(messages: list[ChatMessage]) -> str:
    """A plain transcript; the emulated tokenizer needs only stable pieces, not a chat template."""
    return " ".join(f"<{m.role}> {m.content}" for m in messages)
