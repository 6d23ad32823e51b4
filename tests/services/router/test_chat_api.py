"""The chat request schema: OpenAI's ranges and the message shapes tool-using clients send."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.router.chat_api import ChatRequest, chat_prompt

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("extra", [{"top_logprobs": 21, "logprobs": True}, {"top_logprobs": 2},
                                   {"logprobs": 1}, {"response_format": {"type": "yaml"}},
                                   {"min_tokens": 9, "max_completion_tokens": 8}])
def test_chat_ranges_are_openais(extra):
    with pytest.raises(ValidationError):
        ChatRequest.model_validate({**CHAT, **extra})


def test_chat_takes_the_shapes_tool_using_clients_send():
    body = ChatRequest.model_validate({**CHAT, "messages": [
        {"role": "system", "content": [{"type": "text", "text": "be brief"}], "name": "ops"},
        {"role": "user", "content": [{"type": "text", "text": "weather"}, {"type": "text", "text": "in Oslo"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                                "function": {"name": "w", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "rain"}],
        "tools": [{"type": "function", "function": {"name": "w", "parameters": {}}}], "tool_choice": "auto",
        "response_format": {"type": "json_object"}})
    assert chat_prompt(body.messages) == "<system> be brief <user> weather in Oslo <assistant>  <tool> rain"


@pytest.mark.parametrize("message, fragment", [
    ({"role": "user", "content": None}, "null"),
    ({"role": "assistant", "content": None}, "null"),
    ({"role": "tool", "content": "x"}, "tool_call_id"),
    ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}, "text only"),
])
def test_chat_messages_that_cannot_be_read_are_refused(message, fragment):
    with pytest.raises(ValidationError, match=fragment):
        ChatRequest.model_validate({**CHAT, "messages": [message]})
