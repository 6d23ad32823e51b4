"""A prompt's intake at the router on a real PD mesh: the `received` stamp, packed ids, bad ids."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from services.chaos.outcomes import FaultFreeText
from services.engine.tokens import WordTokenizer
from services.profiles import load_model
from tests.integration.mesh import running_mesh

pytestmark = pytest.mark.integration

MODEL = "llama3-8b"
VOCAB = load_model(MODEL).vocab_size
SIZE = WordTokenizer(VOCAB).size  # ids a prompt may hold: the words, then the byte tokens
# Ids across the whole vocabulary, the top one included, so a packing that kept 16 or 17 bits would show.
IDS = [(i * 7919) % VOCAB for i in range(2000)] + [VOCAB - 1, 0, 65535, 65536]


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with running_mesh("pd-intra-mini", tmp_path_factory.mktemp("intake")) as router:
        yield router


def _post(url: str, body: dict | bytes) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(f"{url}/v1/completions", data=data, method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.parametrize("form", ["ids", "text"])
def test_received_comes_before_prefill_is_sent_and_done(url, form):
    prompt = IDS if form == "ids" else WordTokenizer(VOCAB).decode(IDS)
    sent = time.time()
    status, reply = _post(url, {"model": MODEL, "prompt": prompt, "max_tokens": 3, "seed": 11})
    assert status == 200, reply
    timeline = reply["pdd"]["timeline"]
    assert sent <= timeline["received"] <= timeline["prefill_sent"] <= timeline["prefill_done"]
    assert timeline["prefill_done"] <= timeline["first_token"] <= timeline["finished"] <= time.time()
    assert reply["usage"]["prompt_tokens"] == len(IDS)


def test_ids_cross_every_hop_intact(url):
    """Output token i is a function of the prompt's ids, i and the seed (services/engine/tokens.py), computed by
    prefill (token 0) and decode (the rest) from the ids they were sent: any id changed on the way shows."""
    oracle = FaultFreeText(5, VOCAB)
    body = {"model": MODEL, "max_tokens": 6, "seed": 5}
    for prompt in (IDS, WordTokenizer(VOCAB).decode(IDS), IDS[:-1] + [IDS[-1] + 1]):
        status, reply = _post(url, {**body, "prompt": prompt})
        ids = WordTokenizer(VOCAB).encode(prompt) if isinstance(prompt, str) else prompt
        assert status == 200 and reply["choices"][0]["text"] == oracle.text(oracle.ids(ids, 6))


@pytest.mark.parametrize("prompt, what", [
    ([1, 2, SIZE], f"{SIZE}"),  # past the words and the byte tokens (docs/engine.md, "Tokens")
    ([1, -1, 2], "-1"),
    ([1, True, 2], "bool"),
    ([1, 2.0, 3], "float"),
    ([1, 2.5], "float"),
    ([1, "7"], "str"),
    ([1, None], "null"),
    ([1, [2]], "array"),  # a list of id lists is a batch; one inside a list of ids is not
    ([2**40], f"{2**40}"),
    ([2**70], f"{2**70}"),
])
def test_bad_ids_get_a_clear_400_and_the_router_keeps_serving(url, prompt, what):
    status, reply = _post(url, {"model": MODEL, "prompt": prompt, "max_tokens": 2})
    message = reply["error"]["message"]
    assert status == 400 and "token ids" in message and f"0..{SIZE - 1}" in message and what in message, message
    ok, _ = _post(url, {"model": MODEL, "prompt": [1, 2, 3], "max_tokens": 2})
    assert ok == 200
