"""Bad input against a real running router (pdd-mini): always a clear 4xx JSON error, and it keeps serving.

Anything the router accepts must come back with exactly the fault-free text of
the request it understood (services/engine/tokens.py), so the oracle below
re-derives prompt, length and seed the way the OpenAI API defines them.
"""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from services.chaos.outcomes import FaultFreeText
from services.engine.tokens import WordTokenizer
from services.profiles import load_model
from services.router.chat_api import ChatMessage, chat_prompt
from tests.integration.mesh import get_json, running_mesh

pytestmark = pytest.mark.integration

MODEL = "llama3-8b"
SEED = 7  # pdd-mini's
VOCAB = load_model(MODEL).vocab_size
ORACLE = FaultFreeText(SEED, VOCAB)
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=16),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8)
small_lengths = st.integers(-2, 12) | st.sampled_from([2**31, 2**63, 10**12, 1.5, "8"]) | json_values
prompts = st.text(max_size=120) | st.lists(st.integers(-3, 200_000), max_size=40) | json_values
common = {"model": st.sampled_from([MODEL, "gpt-4o", ""]) | json_values, "max_tokens": small_lengths,
          "stream": st.booleans() | json_values, "seed": st.integers(-1, 2**33) | json_values,
          "n": st.integers(0, 2) | json_values, "temperature": json_values}
messages = st.lists(st.fixed_dictionaries({
    "role": st.sampled_from(["system", "user", "assistant", "tool", "robot"]) | json_values,
    "content": st.text(max_size=60) | json_values}), max_size=3) | json_values
completion_bodies = st.fixed_dictionaries({}, optional={**common, "prompt": prompts})
chat_bodies = st.fixed_dictionaries({}, optional={**common, "messages": messages,
                                                  "max_completion_tokens": small_lengths})


@pytest.fixture(scope="module")
def router(tmp_path_factory) -> str:
    with running_mesh("pdd-mini", tmp_path_factory.mktemp("fuzz")) as url:
        yield url


def _post(url: str, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, str, str]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        reply = conn.getresponse()
        return reply.status, reply.getheader("Content-Type", ""), reply.read().decode("utf-8", "replace")
    finally:
        conn.close()


def _assert_clear_error(status: int, content_type: str, text: str) -> None:
    assert 400 <= status < 500, f"HTTP {status}: {text[:300]}"
    assert content_type.startswith("application/json"), content_type
    message = json.loads(text)["error"]["message"]
    assert isinstance(message, str) and message


def _expected(body: dict, chat: bool) -> str:
    prompt = chat_prompt([ChatMessage(**m) for m in body["messages"]]) if chat else body["prompt"]
    if isinstance(prompt, list) and isinstance(prompt[0], str):
        prompt = prompt[0]  # a batch: choice 0 answers the first prompt
    ids = WordTokenizer(VOCAB).encode(prompt) if isinstance(prompt, str) else prompt
    length = body.get("max_tokens", 16)
    if chat and body.get("max_completion_tokens"):
        length = body["max_completion_tokens"]
    oracle = FaultFreeText(SEED if body.get("seed") is None else body["seed"], VOCAB)
    return oracle.text(oracle.ids(ids, length))


def _answer_text(content_type: str, text: str, chat: bool) -> str:
    if content_type.startswith("text/event-stream"):
        events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]", "a 200 stream must end with [DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        assert not any("error" in c for c in chunks), chunks
        pick = (lambda c: c["choices"][0]["delta"].get("content", "")) if chat else (lambda c: c["choices"][0]["text"])
        return "".join(pick(c) for c in chunks)
    body = json.loads(text)
    return body["choices"][0]["message"]["content"] if chat else body["choices"][0]["text"]


def _check(url: str, path: str, body: dict, chat: bool) -> None:
    status, content_type, text = _post(url, path, json.dumps(body).encode())
    if status == 200:
        assert _answer_text(content_type, text, chat) == _expected(body, chat)
    else:
        _assert_clear_error(status, content_type, text)


def _still_serving(url: str) -> None:
    body = {"model": MODEL, "prompt": [1, 2, 3, 4], "max_tokens": 5}
    status, content_type, text = _post(url, "/v1/completions", json.dumps(body).encode())
    assert status == 200 and _answer_text(content_type, text, False) == ORACLE.text(ORACLE.ids([1, 2, 3, 4], 5))
    assert get_json(f"{url}/stats")["inflight"] == 0


@FUZZ
@given(data=st.binary(max_size=2048), chat=st.booleans())
def test_arbitrary_bytes_get_a_clear_4xx(router, data, chat):
    path = "/v1/chat/completions" if chat else "/v1/completions"
    _assert_clear_error(*_post(router, path, data))


@FUZZ
@given(body=completion_bodies)
def test_arbitrary_completion_bodies_get_a_4xx_or_the_fault_free_text(router, body):
    _check(router, "/v1/completions", body, chat=False)


@FUZZ
@given(body=chat_bodies)
def test_arbitrary_chat_bodies_get_a_4xx_or_the_fault_free_text(router, body):
    _check(router, "/v1/chat/completions", body, chat=True)


# What HTTP allows in a header value (RFC 9110 field-value: VCHAR, SP, HTAB, obs-text); anything else is
# refused by the HTTP parser itself, before the API sees the request.
header_text = st.text(alphabet=st.characters(codec="latin-1", exclude_categories=("Cc",)), max_size=200)


@FUZZ
@given(request_id=header_text)
def test_arbitrary_request_ids_are_used_or_refused(router, request_id):
    body = {"model": MODEL, "prompt": [9, 8, 7], "max_tokens": 3}
    status, content_type, text = _post(router, "/v1/completions", json.dumps(body).encode(),
                                       {"x-request-id": request_id})
    if status == 200:
        assert _answer_text(content_type, text, False) == ORACLE.text(ORACLE.ids([9, 8, 7], 3))
    else:
        _assert_clear_error(status, content_type, text)
        assert "x-request-id" in json.loads(text)["error"]["message"]


def test_the_router_serves_after_the_fuzzing(router):
    _still_serving(router)


def test_a_request_id_already_in_flight_is_refused(router):
    from concurrent.futures import ThreadPoolExecutor

    long = {"model": MODEL, "prompt": list(range(2000)), "max_tokens": 400}
    other = {"model": MODEL, "prompt": list(range(5, 2005)), "max_tokens": 4}
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(_post, router, "/v1/completions", json.dumps(long).encode(), {"x-request-id": "twin"})
        # The first one decodes for a second or more; the twin arrives while it is in flight.
        deadline = time.monotonic() + 10
        while get_json(f"{router}/stats")["inflight"] == 0 and not first.done():
            assert time.monotonic() < deadline, "the first request never showed as in flight"
            time.sleep(0.005)  # polling the router's counter
        second = _post(router, "/v1/completions", json.dumps(other).encode(), {"x-request-id": "twin"})
        status, content_type, text = first.result()
    assert status == 200 and _answer_text(content_type, text, False) == ORACLE.text(ORACLE.ids(long["prompt"], 400))
    _assert_clear_error(*second)
    assert second[0] == 409 and json.loads(second[2])["error"]["code"] == "duplicate_request_id"


def _raw_exchange(url: str, head: bytes, body: bytes = b"", timeout_s: float = 10.0) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(head + body)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer) < answer.index(b"\r\n\r\n") + 4 + 100:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer


def test_an_announced_oversized_body_is_refused_before_it_is_sent(router):
    # Only the headers go out: the router must answer from Content-Length alone, not wait for 17 MiB.
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (17 * 2**20))
    answer = _raw_exchange(router, head)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"exceeds" in answer
    _still_serving(router)


def test_a_chunked_body_past_the_limit_is_413(router):
    def chunks():
        piece = b"[" + b"1," * (2**20 // 2 - 1) + b"1]"
        for _ in range(18):
            yield piece

    host, port = router.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", "/v1/completions", body=chunks(), encode_chunked=True,
                     headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
        reply = conn.getresponse()
        status, text = reply.status, reply.read().decode()
    except (BrokenPipeError, ConnectionResetError):
        pytest.fail("the router dropped the connection instead of answering 413")
    finally:
        conn.close()
    assert status == 413 and "exceeds" in json.loads(text)["error"]["message"]
    _still_serving(router)


@pytest.mark.parametrize("prompt", [list(range(131_073)), " ".join(["w"] * 300_000)], ids=["ids", "text"])
def test_a_prompt_past_the_context_is_400(router, prompt):
    body = json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": 1}).encode()
    status, content_type, text = _post(router, "/v1/completions", body)
    _assert_clear_error(status, content_type, text)
    assert json.loads(text)["error"]["code"] == "context_length_exceeded"


@pytest.mark.parametrize("body", [b"[" * 100_000 + b"]" * 100_000, b'{"prompt": "\\ud800", "model": "llama3-8b"}'],
                         ids=["nested", "lone-surrogate"])
def test_json_python_cannot_handle_is_a_400(router, body):
    _assert_clear_error(*_post(router, "/v1/completions", body))
    _still_serving(router)
