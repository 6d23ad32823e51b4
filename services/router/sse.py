"""The bytes of a streamed answer: one SSE chunk per token, in vLLM's stream shape.

Every token chunk of a request differs from the others only in its text, so
the request's chunk is encoded once as a prefix and a suffix around the text,
and a token's chunk is three byte strings joined (docs/mesh-measured.md §Cost of a
streamed token).
The shape follows vLLM's OpenAI server: the first chat delta carries
`role: "assistant"`; the finishing chunk carries `finish_reason` (and this
emulator's `pdd` object); usage comes only with `stream_options.include_usage`,
in a last chunk whose `choices` is empty, and with `continuous_usage_stats` in
every chunk as well (the tokens so far); then `data: [DONE]`.
"""

from __future__ import annotations

import functools
import json
from typing import Any

DONE = b"data: [DONE]\n\n"


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


@functools.lru_cache(maxsize=1 << 18)  # more than any vocabulary: a word is encoded once, not per token
def text_json(text: str) -> bytes:
    """A token's text as a JSON string literal.

    The emulated vocabulary's words are printable ASCII without quotes or backslashes, which
    JSON writes as they are; anything else goes through the JSON encoder.
    """
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return b'"' + text.encode() + b'"'
    return json.dumps(text).encode()


def response_id(request_id: str, chat: bool) -> str:
    """vLLM's ids: `chatcmpl-` for chat, `cmpl-` for completions, then the request's id."""
    return f"{'chatcmpl' if chat else 'cmpl'}-{request_id}"


def sse(payload: dict) -> bytes:
    return b"data: " + _json(payload).encode() + b"\n\n"


class ChunkEncoder:
    """The chunks of one streamed request; ids, `created` and model are encoded once, here."""

    __slots__ = ("chat", "index", "usage_prompt", "_head", "_prefix", "_suffix", "_first_prefix")

    def __init__(self, request_id: str, created: int, model: str, chat: bool, index: int = 0,
                 usage_prompt: int | None = None) -> None:
        """`index`: the choice these chunks carry (a request with n > 1 or a batch streams several);
        `usage_prompt`: the prompt's tokens, when every chunk carries the usage so far (`counted`)."""
        self.chat, self.index, self.usage_prompt = chat, index, usage_prompt
        kind = "chat.completion.chunk" if chat else "text_completion"
        self._head = {"id": response_id(request_id, chat), "object": kind, "created": created, "model": model}
        head = _json(self._head)[:-1]  # the object without its closing brace
        if chat:
            self._first_prefix = f'data: {head},"choices":[{{"index":{index},"delta":{{"role":"assistant","content":'.encode()
            self._prefix = f'data: {head},"choices":[{{"index":{index},"delta":{{"content":'.encode()
            self._suffix = b'},"logprobs":null,"finish_reason":null}]}\n\n'
        else:
            self._first_prefix = self._prefix = f'data: {head},"choices":[{{"index":{index},"text":'.encode()
            self._suffix = b',"logprobs":null,"finish_reason":null}]}\n\n'

    def token(self, text: str, first: bool = False) -> bytes:
        """The chunk of one token; `first` for a request's first token (the chat delta names the role)."""
        return (self._first_prefix if first else self._prefix) + text_json(text) + self._suffix

    def token_logprobs(self, text: str, logprobs: dict[str, Any], first: bool = False) -> bytes:
        """A token's chunk with its logprobs: only when the request asks for them, so off the fast path."""
        if self.chat:
            delta = {"role": "assistant", "content": text} if first else {"content": text}
            choice = {"index": self.index, "delta": delta, "logprobs": logprobs, "finish_reason": None}
        else:
            choice = {"index": self.index, "text": text, "logprobs": logprobs, "finish_reason": None}
        return sse({**self._head, "choices": [choice]})

    def finish(self, reason: str, pdd: dict[str, Any]) -> bytes:
        """The chunk that ends the choice: no text, its finish_reason, and the request's `pdd` object."""
        if self.chat:
            choice = {"index": self.index, "delta": {}, "logprobs": None, "finish_reason": reason}
        else:
            choice = {"index": self.index, "text": "", "logprobs": None, "finish_reason": reason}
        return sse({**self._head, "choices": [choice], "pdd": pdd})

    def counted(self, chunk: bytes, completion_tokens: int) -> bytes:
        """`chunk` with the usage so far in it, as vLLM writes `stream_options.continuous_usage_stats`;
        `chunk` itself when that was not asked."""
        if self.usage_prompt is None or not chunk:
            return chunk
        prompt = self.usage_prompt
        usage = f',"usage":{{"prompt_tokens":{prompt},"total_tokens":{prompt + completion_tokens},' \
                f'"completion_tokens":{completion_tokens}}}}}\n\n'
        return chunk[:-3] + usage.encode()  # every chunk ends with the object's brace and "\n\n"

    def usage(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> bytes:
        """The usage chunk (stream_options.include_usage): empty `choices`, as vLLM and OpenAI send it."""
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens,
                 "prompt_tokens_details": {"cached_tokens": cached_tokens}}
        return sse({**self._head, "choices": [], "usage": usage})


def error_event(body: dict[str, Any]) -> bytes:
    """An error after the stream began: an SSE event with the OpenAI error body (then DONE)."""
    return sse(body)
