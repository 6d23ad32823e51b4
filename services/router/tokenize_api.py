"""vLLM's tokenizer endpoints and its version: `POST /tokenize`, `POST /detokenize`, `GET /version`.

Shapes as vLLM's OpenAI server has them (docs/mesh.md, "API conformance"):
/tokenize takes a completion's `prompt` or a chat's `messages` and answers
`{count, max_model_len, tokens, token_strs}`; /detokenize takes `tokens` and
answers `{prompt}`, the text the exported tokenizer's decode gives for them.
The emulated model has no special tokens, so `add_special_tokens` and
`add_generation_prompt` change nothing.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from services.router.api import ApiError, parse_body
from services.router.chat_api import ChatMessage, chat_prompt


class _Tokenize(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: StrictStr | None = None
    prompt: StrictStr | None = None
    messages: list[ChatMessage] | None = Field(None, min_length=1)
    add_special_tokens: StrictBool = True
    add_generation_prompt: StrictBool = True
    return_token_strs: StrictBool | None = False


class _Detokenize(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: StrictStr | None = None
    tokens: list[StrictInt]


def _served(router, model: str | None) -> None:
    if model is not None and model != router.scenario.model:
        raise ApiError(404, f"The model `{model}` does not exist.", kind="NotFoundError", code="model_not_found",
                       param="model")


async def tokenize(request: web.Request, router) -> web.Response:
    body = await parse_body(request, _Tokenize)
    _served(router, body.model)
    if (body.prompt is None) == (body.messages is None):
        raise ApiError(400, "give either `prompt` (a completion's) or `messages` (a chat's)")
    text = body.prompt if body.messages is None else chat_prompt(body.messages)
    ids = router.tokenizer.encode(text)
    strs = [router.tokenizer.token_name(i) for i in ids] if body.return_token_strs else None
    return web.json_response({"count": len(ids), "max_model_len": router.model.max_context, "tokens": ids,
                              "token_strs": strs})


async def detokenize(request: web.Request, router) -> web.Response:
    body = await parse_body(request, _Detokenize)
    _served(router, body.model)
    try:
        text = router.tokenizer.detokenize(body.tokens)
    except ValueError as exc:
        raise ApiError(400, str(exc), param="tokens") from exc
    return web.json_response({"prompt": text})


def _version() -> str:
    try:
        return version("pdd-emu")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


async def server_version(_request: web.Request) -> web.Response:
    return web.json_response({"version": _version()})
