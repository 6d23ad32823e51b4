"""Request validation for the OpenAI-compatible API; its refusals are ApiErrors (services/router/failures.py).

Known OpenAI and vLLM fields are type- and range-checked as OpenAI checks them
(docs/mesh.md, "API conformance"); sampling parameters, `tools` and
`response_format` are accepted and have no effect on the deterministic output.
`max_tokens` is the output length unless a stop rule ends it earlier: the
emulated model emits no end-of-sequence token.
"""

from __future__ import annotations

import asyncio
import re

import numpy as np
from aiohttp import web
from pydantic import (
    BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError, ValidationInfo,
    field_validator, model_validator,
)

from services.router.failures import ApiError  # noqa: F401 (re-exported: the handlers raise it from here)
from services.router.intake import load_json, parse_ids
from services.router.stops import MAX_STOP_CHARS, MAX_STOP_TOKEN_IDS, MAX_STOPS
from services.rpc.ids import MAX_ID

# A 128K-token prompt is about 1 MiB as JSON ids or as text; the cap keeps the worst body's parse (and the
# router's event loop stall) to tens of ms, and aiohttp refuses more while reading, before any parsing.
MAX_BODY_BYTES = 4 * 1024 * 1024
BODY_READ_S = 30.0  # a body that trickles in slower than this is refused (408), its connection freed
# A request id names the request's KV transfers and rides in gRPC metadata and KV frame headers on
# every hop, so it must be short plain ASCII; "/" is left out because internal ids append "/handoff",
# and "#" because a request's jobs are `<id>#<index>` (services/router/fanout.py): no job id is a client's.
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# A request's choices are its prompts x n, each a job through the mesh: OpenAI's bound on n is 128, and a
# batch of prompts asks for the same work as n does, so the product is held to it (docs/mesh.md).
MAX_CHOICES = 128


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: StrictBool = True  # a last chunk with usage and no choices (vLLM's default once asked)
    continuous_usage_stats: StrictBool = False  # usage so far in every chunk too (vLLM's)


class CommonRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str
    max_tokens: StrictInt = Field(16, ge=1)
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    seed: StrictInt | None = Field(None, ge=0, lt=2**32)
    n: StrictInt = Field(1, ge=1, le=128)
    temperature: StrictFloat | StrictInt | None = Field(None, ge=0, le=2)
    top_p: StrictFloat | StrictInt | None = Field(None, ge=0, le=1)
    presence_penalty: StrictFloat | StrictInt | None = Field(None, ge=-2, le=2)
    frequency_penalty: StrictFloat | StrictInt | None = Field(None, ge=-2, le=2)
    logit_bias: dict[str, StrictFloat | StrictInt] | None = None
    user: str | None = None
    stop: StrictStr | list[StrictStr] | None = None
    # vLLM's extra sampling parameters, with vLLM's ranges.
    stop_token_ids: list[StrictInt] | None = Field(None, max_length=MAX_STOP_TOKEN_IDS)
    ignore_eos: StrictBool = False  # the emulated model has no end-of-sequence token to ignore
    min_tokens: StrictInt = Field(0, ge=0)
    top_k: StrictInt | None = Field(None, ge=-1)
    min_p: StrictFloat | StrictInt | None = Field(None, ge=0, le=1)
    repetition_penalty: StrictFloat | StrictInt | None = Field(None, gt=0)

    @field_validator("logit_bias")
    @classmethod
    def _bias_range(cls, v):
        for token, bias in (v or {}).items():
            if not token.isdigit() or not -100 <= bias <= 100:
                raise ValueError("logit_bias maps token ids to values from -100 to 100")
        return v

    @field_validator("stop")
    @classmethod
    def _stop_strings(cls, v):
        stops = [v] if isinstance(v, str) else v or []
        if len(stops) > MAX_STOPS:
            raise ValueError(f"at most {MAX_STOPS} stop sequences are allowed, got {len(stops)}")
        if any(not s for s in stops):
            raise ValueError("stop sequences must not be empty")
        if longest := max((s for s in stops if len(s) > MAX_STOP_CHARS), key=len, default=None):
            raise ValueError(f"a stop sequence may be at most {MAX_STOP_CHARS} characters, got one of {len(longest)}")
        return [unicode_text(s, "stop") for s in stops] or None

    @model_validator(mode="after")
    def _stream_options_need_a_stream(self):
        if self.stream_options is not None and not self.stream:  # as OpenAI and vLLM refuse it
            raise ValueError("stream_options is only allowed when stream is true")
        return self

    @model_validator(mode="after")
    def _min_within_max(self):
        if self.min_tokens > self.output_limit():
            raise ValueError(f"min_tokens ({self.min_tokens}) must be at most max_tokens ({self.output_limit()})")
        return self

    def output_limit(self) -> int:
        return self.max_tokens


def unicode_text(text: str, what: str) -> str:
    """JSON may carry lone surrogates ("\\ud800"); they are not text, and no tokenizer can encode them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid Unicode text (it holds a lone surrogate)") from None
    return text


class CompletionRequest(CommonRequest):
    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)
    # ids arrive as int64 (the router checks their range: services/router/intake.py); a list of strings or of
    # id lists is a batch: one choice per prompt
    prompt: str | np.ndarray | list[StrictStr] | list[np.ndarray]
    echo: StrictBool = False
    logprobs: StrictInt | None = Field(None, ge=0, le=5)
    best_of: StrictInt | None = Field(None, ge=1)

    @field_validator("prompt", mode="before")
    @classmethod
    def _ids(cls, v, info: ValidationInfo):
        # One C-level pass over the ids, not one Python check per item; the message names the served vocabulary.
        vocab_size = (info.context or {}).get("vocab_size", MAX_ID + 1)
        if isinstance(v, list) and v and isinstance(v[0], list):
            return [_batch_ids(p, i, vocab_size) for i, p in enumerate(v)]
        if isinstance(v, list) and not (v and isinstance(v[0], str)):
            return parse_ids(v, vocab_size)
        return v

    @field_validator("prompt")
    @classmethod
    def _not_empty(cls, v, info: ValidationInfo):
        if isinstance(v, str) and not v.strip():  # an empty list of ids is refused by parse_ids
            raise ValueError("prompt is empty")
        if isinstance(v, list) and isinstance(v[0], str):
            _choices_bound(len(v), info.data.get("n", 1))  # before any work on the batch's prompts
            return [_not_blank(p, f"prompt[{i}]") for i, p in enumerate(v)]
        return unicode_text(v, "prompt") if isinstance(v, str) else v

    @model_validator(mode="after")
    def _best_of_covers_n(self):
        if self.best_of is not None and self.best_of < self.n:
            raise ValueError(f"best_of ({self.best_of}) must be at least n ({self.n})")
        return self

    def prompts(self) -> list[str | list[int]]:
        """The batch: one entry per prompt, in request order."""
        return list(self.prompt) if isinstance(self.prompt, list) else [self.prompt]


def _batch_ids(values: object, index: int, vocab_size: int) -> np.ndarray:
    try:
        return parse_ids(values, vocab_size)
    except ValueError as exc:  # the message names the item inside the batch: `prompt[1][3]`
        where = f"prompt[{index}]"
        raise ValueError(str(exc).replace("`prompt", f"`{where}").replace("prompt is", f"{where} is")) from None


def _choices_bound(prompts: int, n: int) -> None:
    """A ValueError naming MAX_CHOICES when a batch of `prompts` times `n` asks for more choices."""
    if prompts * n > MAX_CHOICES:
        raise ValueError(f"{prompts} prompts x n={n} ask for {prompts * n} choices; a request may ask for at most "
                         f"{MAX_CHOICES} (prompts x n)")


def _not_blank(text: str, what: str) -> str:
    if not text.strip():
        raise ValueError(f"{what} is empty")
    return unicode_text(text, what)


def _first_problem(exc: ValidationError) -> tuple[str, str]:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "body"
    return f"{where}: {err['msg']}", where


async def parse_body(request: web.Request, schema: type[BaseModel], context: dict | None = None) -> BaseModel:
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise ApiError(413, f"request body of {request.content_length} bytes exceeds {MAX_BODY_BYTES}")
    try:
        async with asyncio.timeout(BODY_READ_S):
            raw = await request.read()
        data = load_json(raw)
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
        return schema.model_validate(data, context=context)
    except ValidationError as exc:
        message, where = _first_problem(exc)
        raise ApiError(400, message, param=where) from exc


def client_request_id(value: str | None) -> str | None:
    """The caller's x-request-id if it is usable as ours; a 400 otherwise."""
    if value is None:
        return None
    if not REQUEST_ID.fullmatch(value):
        raise ApiError(400, "x-request-id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -",
                       code="invalid_request_id")
    return value
