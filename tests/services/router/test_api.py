"""The request schema: OpenAI's ranges, the shapes real clients send, and prompt batches."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.router.api import CompletionRequest
from services.router.chat_api import ChatRequest

BASE = {"model": "m", "prompt": "hello"}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("field, bad, good", [
    ("temperature", 2.01, 2), ("temperature", -0.1, 0), ("top_p", 1.5, 1), ("top_p", -1, 0.5),
    ("presence_penalty", 2.5, -2), ("frequency_penalty", -3, 2), ("n", 0, 3), ("n", 129, 128),
    ("logprobs", 6, 5), ("logprobs", -1, 0), ("best_of", 0, 1), ("min_p", 1.1, 0.2), ("top_k", -2, -1),
    ("repetition_penalty", 0, 1.1), ("logit_bias", {"5": 101}, {"5": -100}), ("logit_bias", {"x": 1}, {"7": 1}),
    ("stop", "", "###"), ("stop", ["a", ""], ["a", "b"]), ("temperature", True, 0.7), ("min_tokens", 17, 16),
])
def test_completion_ranges_are_openais(field, bad, good):
    with pytest.raises(ValidationError, match=field):
        CompletionRequest.model_validate({**BASE, field: bad})
    assert getattr(CompletionRequest.model_validate({**BASE, field: good}), field) is not None


def test_best_of_must_cover_n():
    with pytest.raises(ValidationError, match="best_of"):
        CompletionRequest.model_validate({**BASE, "n": 3, "best_of": 2})


def test_a_stop_string_becomes_a_list():
    assert CompletionRequest.model_validate({**BASE, "stop": "\n"}).stop == ["\n"]


def test_a_prompt_list_of_strings_is_a_batch_in_order():
    body = CompletionRequest.model_validate({**BASE, "prompt": ["one", "two words", "three"]})
    assert body.prompts() == ["one", "two words", "three"]
    assert CompletionRequest.model_validate(BASE).prompts() == ["hello"]
    (ids,) = CompletionRequest.model_validate({**BASE, "prompt": [1, 2]}).prompts()  # ids: one prompt, not a batch
    assert ids.tolist() == [1, 2]
    with pytest.raises(ValidationError, match="prompt"):
        CompletionRequest.model_validate({**BASE, "prompt": ["fine", " "]})


def test_stream_options_need_a_stream():
    options = {"stream_options": {"include_usage": True}}
    with pytest.raises(ValidationError, match="stream_options is only allowed when stream is true"):
        CompletionRequest.model_validate({**BASE, **options})
    with pytest.raises(ValidationError, match="stream_options"):
        ChatRequest.model_validate({**CHAT, **options, "stream": False})
    assert CompletionRequest.model_validate({**BASE, **options, "stream": True}).stream_options.include_usage
