"""PDD end to end: pipeline choice, eager relay tokens, handoff, singular finish, over real links."""

from __future__ import annotations

import time

import pytest

from services.profiles import load_model
from tests.integration.mesh import get_json, link_stats, plan_of, running_mesh
from tests.integration.test_mesh_modes import _stream

pytestmark = pytest.mark.integration

MODEL = "llama3-8b"
KV = load_model(MODEL).kv_bytes_per_token


def _prompt(n: int, salt: int) -> list[int]:
    return [(i * 7919 + salt * 104729) % 50000 for i in range(n)]


LOW_HIT = _prompt(30000, 1)  # fresh: 3.9 GB of KV, about 3.1 s over the 10 Gbit/s WAN
SINGULAR = _prompt(30000, 2)


@pytest.fixture(scope="module")
def reference_texts(tmp_path_factory) -> dict[str, str]:
    """The same requests on the intra-datacenter PD baseline."""
    with running_mesh("pd-intra-mini", tmp_path_factory.mktemp("pd-intra")) as url:
        return {"low-hit": _stream(url, LOW_HIT, 700)[0], "singular": _stream(url, SINGULAR, 4)[0]}


@pytest.fixture(scope="module")
def pdd_mesh(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("pdd")
    with running_mesh("pdd-mini", run_dir) as url:
        yield url, run_dir


def _service_stats(run_dir, name: str) -> dict:
    service = next(s for s in plan_of(run_dir)["services"] if s["name"] == name)
    return get_json(f"http://{service['host']}:{service['http_port']}/stats")


def test_low_hit_request_relays_then_hands_off_with_identical_text(pdd_mesh, reference_texts):
    url, _ = pdd_mesh
    text, pdd = _stream(url, LOW_HIT, 700)
    assert pdd["pipeline"] == "P-RLD-MD" and not pdd["singular"] and not pdd["fallback"]
    # Eager tokens: the relay's first token reached the client before main decode had its KV.
    assert pdd["timeline"]["first_token"] < pdd["timeline"]["kv_arrived"]
    assert pdd["rld_tokens"] > 0 and pdd["md_tokens"] > 0 and pdd["rld_tokens"] + pdd["md_tokens"] == 700
    assert pdd["handoff"]["mode"] == "catch-up"  # a large backlog on an idle relay
    assert pdd["handoff"]["cut"] == pdd["rld_tokens"]
    assert pdd["wan_bytes"] == len(LOW_HIT) * KV
    assert text == reference_texts["low-hit"]


def test_follow_up_turn_with_high_hit_goes_p_md(pdd_mesh):
    url, _ = pdd_mesh
    # The first turn's output outlasts its 0.85 s transfer, so main decode takes over and caches the turn.
    first_text, first = _stream(url, _prompt(8000, 3), 200)
    assert first["pipeline"] == "P-RLD-MD"
    from services.engine.tokens import WordTokenizer

    answer = WordTokenizer(load_model(MODEL).vocab_size).encode(first_text)
    text, pdd = _stream(url, _prompt(8000, 3) + answer + _prompt(200, 4), 16)
    assert pdd["pipeline"] == "P-MD" and pdd["rld_tokens"] == 0 and pdd["handoff"] is None
    assert pdd["decode_hit_tokens"] >= 8000 + 200 - 16  # main decode's prefix cache held the whole first turn
    assert pdd["wan_bytes"] < 300 * KV


def test_long_prompt_short_output_ends_singular_and_stops_the_wan_transfer(pdd_mesh, reference_texts):
    url, run_dir = pdd_mesh
    before = link_stats(run_dir, "wan")["up"]["bytes"]
    text, pdd = _stream(url, SINGULAR, 4)
    assert pdd["pipeline"] == "P-RLD" and pdd["singular"] and pdd["rld_tokens"] == 4
    assert text == reference_texts["singular"]
    deadline = time.monotonic() + 20
    while _service_stats(run_dir, "prefill")["transfers_in_flight"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _service_stats(run_dir, "prefill")["transfers_cancelled"] >= 1
    carried = link_stats(run_dir, "wan")["up"]["bytes"] - before
    full = len(SINGULAR) * KV / 1000
    assert carried < 0.5 * full, f"the WAN carried {carried} of {full:.0f} bytes after the cancel"


def test_busy_relay_gets_one_shot_handoffs(tmp_path):
    # Any running sequence counts as busy here (one is 1/2048 of the relay's derived running cap),
    # so the handoff must not hold the relay for catch-up.
    with running_mesh("pdd-mini", tmp_path, "pdd.busy_relay_load=0.0001") as url:
        _, pdd = _stream(url, _prompt(30000, 5), 700)
    assert pdd["pipeline"] == "P-RLD-MD"
    assert pdd["handoff"]["mode"] == "one-shot" and pdd["handoff"]["chunks"] == 1
