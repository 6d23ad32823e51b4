"""Chat completions: the messages a request may carry and the transcript the emulated model reads.

The fields follow OpenAI's chat API as services/router/api.py checks the shared
ones (docs/mesh.md, "API conformance"): text content only, tool calls and tool
results accepted as turns of the transcript, `response_format` accepted and
without effect on the deterministic output.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator, model_validator

from services.router.api import CommonRequest, unicode_text


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["text"]
    text: StrictStr


class ChatMessage(BaseModel):
    """One message; `content` may be text, a list of text parts, or null on an assistant turn with tool calls."""

    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: StrictStr | list[TextPart] | None = None
    name: StrictStr | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: StrictStr | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _text_only(cls, v):
        for part in v if isinstance(v, list) else []:
            if isinstance(part, dict) and part.get("type") not in ("text", None):
                raise ValueError(f"content part of type {part.get('type')!r} is not supported: this model "
                                 "takes text only")
        return v

    @model_validator(mode="after")
    def _content_present(self):
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("content may be null only on an assistant message with tool_calls")
        if self.role == "tool" and self.tool_call_id is None:
            raise ValueError("a tool message needs tool_call_id")
        unicode_text(self.text(), "content")
        return self

    def text(self) -> str:
        if isinstance(self.content, list):
            return " ".join(part.text for part in self.content)
        return self.content or ""


class ChatRequest(CommonRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: StrictInt | None = Field(None, ge=1)
    logprobs: StrictBool = False
    top_logprobs: StrictInt | None = Field(None, ge=0, le=20)
    # Accepted so tool-using clients work unchanged; the emulated model never calls a tool.
    tools: list[dict[str, Any]] | None = None
    tool_choice: StrictStr | dict[str, Any] | None = None
    parallel_tool_calls: StrictBool | None = None
    response_format: dict[str, Any] | None = None

    @field_validator("response_format")
    @classmethod
    def _format_kind(cls, v):
        if v is not None and v.get("type") not in ("text", "json_object", "json_schema"):
            raise ValueError("response_format.type must be text, json_object or json_schema")
        return v

    @model_validator(mode="after")
    def _top_needs_logprobs(self):
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs: true")
        return self

    def output_limit(self) -> int:
        return self.max_completion_tokens or self.max_tokens


def chat_prompt(messages: list[ChatMessage]) -> str:
    """A plain transcript; the emulated tokenizer needs only stable pieces, not a chat template."""
    return " ".join(f"<{m.role}> {m.text()}" for m in messages)
