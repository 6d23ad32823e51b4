"""The request schema: OpenAI's ranges, the shapes real clients send, and prompt batches."""

from __future__ import annotations

import re

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


@pytest.mark.parametrize("fields, fragment", [
    ({"stop": ["a", "b", "c", "d", "e"]}, "at most 4 stop sequences are allowed, got 5"),
    ({"stop": "Q" * 1001}, "a stop sequence may be at most 1000 characters, got one of 1001"),
    ({"stop_token_ids": list(range(257))}, "stop_token_ids"),
    ({"prompt": ["p"] * 129}, "129 prompts x n=1 ask for 129 choices; a request may ask for at most 128"),
    ({"prompt": ["p"] * 3, "n": 43}, "3 prompts x n=43 ask for 129 choices"),
])
def test_what_a_request_may_ask_for_is_bounded(fields, fragment):
    with pytest.raises(ValidationError, match=re.escape(fragment)):
        CompletionRequest.model_validate({**BASE, **fields})


def test_the_bounds_themselves_are_allowed():
    body = CompletionRequest.model_validate({**BASE, "stop": ["Q" * 1000, "a", "b", "c"], "prompt": ["p"] * 64,
                                             "n": 2, "stop_token_ids": list(range(256))})
    assert len(body.stop) == 4 and len(body.prompts()) * body.n == 128
    with pytest.raises(ValidationError, match="at most 4 stop sequences"):
        ChatRequest.model_validate({**CHAT, "stop": list("abcde")})
