"""The router's OpenAI-compatible surface on a real colocated mesh: chat, models, ids, errors."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import openai
import pytest

from tests.integration.mesh import get_json, running_mesh

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running_mesh("colocated-mini", tmp_path_factory.mktemp("api")) as router:
        yield router


def _post(url: str, body: bytes, headers: dict | None = None) -> tuple[int, dict, dict]:
    request = urllib.request.Request(f"{url}/v1/completions", data=body, method="POST",
                                     headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, dict(reply.headers), json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def test_models_lists_the_scenario_model(url):
    models = get_json(f"{url}/v1/models")
    assert [m["id"] for m in models["data"]] == ["llama3-8b"] and models["data"][0]["max_model_len"] >= 32768


def test_chat_completion_streams_exactly_max_tokens(url):
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=60, max_retries=0)
    stream = client.chat.completions.create(model="llama3-8b", max_tokens=12, stream=True,
                                            messages=[{"role": "user", "content": "plan the next step"}])
    pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(pieces) == 12
    reply = client.chat.completions.create(model="llama3-8b", max_tokens=12,
                                           messages=[{"role": "user", "content": "plan the next step"}])
    assert reply.choices[0].message.content == "".join(pieces) and reply.usage.completion_tokens == 12


def test_request_id_is_echoed_and_usage_is_counted(url):
    body = json.dumps({"model": "llama3-8b", "prompt": [1, 2, 3, 4], "max_tokens": 3}).encode()
    status, headers, reply = _post(url, body, {"x-request-id": "trace-me-42"})
    assert status == 200 and headers["x-request-id"] == "trace-me-42" and reply["id"] == "cmpl-trace-me-42"
    assert reply["usage"] == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}
    assert reply["pdd"]["pipeline"] == "colocated"


@pytest.mark.parametrize("body, status, fragment", [
    (b"{not json", 400, "not valid JSON"),
    (b"[1, 2]", 400, "JSON object"),
    (json.dumps({"model": "llama3-8b", "prompt": "", "max_tokens": 4}).encode(), 400, "empty"),
    (json.dumps({"model": "llama3-8b", "prompt": "x", "max_tokens": -1}).encode(), 400, "max_tokens"),
    (json.dumps({"model": "llama3-8b", "prompt": "x", "max_tokens": "many"}).encode(), 400, "max_tokens"),
    (json.dumps({"model": "llama3-8b", "prompt": "x", "max_tokens": 10**9}).encode(), 400, "context"),
    (json.dumps({"model": "llama3-8b", "prompt": [10**9], "max_tokens": 2}).encode(), 400, "token ids"),
    (json.dumps({"model": "gpt-x", "prompt": "x", "max_tokens": 2}).encode(), 404, "not served"),
    (json.dumps({"model": "llama3-8b", "prompt": "x", "max_tokens": 2, "stream": "yes"}).encode(), 400, "stream"),
])
def test_bad_requests_get_openai_errors_and_the_router_keeps_serving(url, body, status, fragment):
    got, _, reply = _post(url, body)
    assert got == status and fragment in reply["error"]["message"] and reply["error"]["type"]
    ok, _, _ = _post(url, json.dumps({"model": "llama3-8b", "prompt": "still here", "max_tokens": 2}).encode())
    assert ok == 200


def test_oversized_body_is_refused_before_it_is_read(url):
    status, _, reply = _post(url, b" " * (17 * 1024 * 1024))
    assert status == 413 and "exceeds" in reply["error"]["message"]
