"""The embedded mesh end to end: real processes, real KV bytes over real links."""

from __future__ import annotations

import openai
import pytest

from services.engine.prefix_cache import block_hashes
from services.profiles import load_model
from tests.integration.mesh import link_stats, running_mesh

pytestmark = pytest.mark.integration

MODEL = "llama3-8b"
PROMPT = [(i * 7919) % 50000 for i in range(3000)]


def _stream(url: str, prompt, max_tokens: int) -> tuple[str, dict]:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=120, max_retries=0)
    pieces, pdd = [], None
    stream = client.completions.create(model=MODEL, prompt=prompt, max_tokens=max_tokens, stream=True)
    for chunk in stream:
        pieces.append(chunk.choices[0].text)
        extra = getattr(chunk, "model_extra", None) or {}
        if extra.get("pdd"):
            pdd = extra["pdd"]
    return "".join(pieces), pdd


@pytest.fixture(scope="module")
def texts(tmp_path_factory) -> dict[str, tuple[str, dict, int]]:
    out = {}
    for scenario in ("colocated-mini", "pd-intra-mini"):
        run_dir = tmp_path_factory.mktemp(scenario)
        with running_mesh(scenario, run_dir) as url:
            text, pdd = _stream(url, PROMPT, 24)
            out[scenario] = (text, pdd, 0)
    return out


def test_pd_cross_streams_exact_tokens_and_matches_other_modes(tmp_path, texts):
    with running_mesh("pd-cross-mini", tmp_path) as url:
        text, pdd = _stream(url, PROMPT, 24)
    pieces = [p for p in text.split(" ") if p]
    assert len(pieces) == 24  # one word per token: exactly max_tokens tokens
    assert text == texts["colocated-mini"][0] == texts["pd-intra-mini"][0]
    assert pdd["mode"] == "pd-cross" and pdd["pipeline"] == "P-D"
    assert texts["colocated-mini"][1]["pipeline"] == "colocated"
    assert pdd["wan_bytes"] == len(PROMPT) * load_model(MODEL).kv_bytes_per_token
    assert texts["pd-intra-mini"][1]["wan_bytes"] == 0  # inside one datacenter nothing crosses the WAN


def test_second_turn_ships_only_its_new_suffix_over_the_wan(tmp_path):
    kv_per_token = load_model(MODEL).kv_bytes_per_token
    with running_mesh("pd-cross-mini", tmp_path) as url:
        before = link_stats(tmp_path, "wan")["up"]["bytes"]
        text1, pdd1 = _stream(url, PROMPT, 16)
        after1 = link_stats(tmp_path, "wan")["up"]["bytes"]
        # The next turn: the whole previous prompt, the answer, and a short new message.
        from services.engine.tokens import WordTokenizer
        answer = WordTokenizer(load_model(MODEL).vocab_size).encode(text1)
        turn2 = PROMPT + answer + [11, 12, 13] * 40
        text2, pdd2 = _stream(url, turn2, 16)
        after2 = link_stats(tmp_path, "wan")["up"]["bytes"]
    assert pdd1["decode_hit_tokens"] == 0 and pdd1["wan_bytes"] == len(PROMPT) * kv_per_token
    # The decode side holds every full block of turn one, so only the suffix crosses.
    assert pdd2["decode_hit_tokens"] >= (len(PROMPT) // 16) * 16
    shipped = len(turn2) - pdd2["decode_hit_tokens"]
    assert shipped < 300 and pdd2["wan_bytes"] == shipped * kv_per_token
    # The link itself carried the real bytes: emulated / byte_scale plus msgpack framing.
    real1, real2 = after1 - before, after2 - after1
    assert pdd1["wan_bytes"] / 1000 <= real1 <= pdd1["wan_bytes"] / 1000 * 1.01 + 4096
    assert pdd2["wan_bytes"] / 1000 <= real2 <= pdd2["wan_bytes"] / 1000 * 1.01 + 4096
    assert real2 < real1 / 5
