"""The compose deployment end to end: real containers, two datacenter networks, every WAN byte via wan-link.

Tests run in file order to switch scenarios only once (pdd, then pd-cross); each
brings up what it needs, so any one of them also runs alone.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from services.engine.tokens import WordTokenizer, output_token, prompt_fingerprint
from services.profiles import load_model
from tests.compose.stack import Outcome, stream_completion
from tests.tolerance import assert_at_least, assert_at_most

pytestmark = pytest.mark.compose

MODEL = load_model("llama3-8b")
KV, SEED, BYTE_SCALE = MODEL.kv_bytes_per_token, 7, 1000
# Uniform jitter lets the netem profile reach the kernel probe; the short timeouts bound every failure.
PDD = ("pdd-mini", "wan.jitter_dist=uniform request_timeout_s=90s transfer_timeout_s=30s")
PD_CROSS = ("pd-cross-mini", "request_timeout_s=90s transfer_timeout_s=30s")
RECOVERY_S = 90


def _prompt(n: int, salt: int) -> list[int]:
    return [(i * 7919 + salt * 104729) % 50000 for i in range(n)]


def expected_text(prompt: list[int], tokens: int) -> str:
    """What any instance must stream: the token at position i depends only on the prompt and i."""
    fingerprint = prompt_fingerprint(prompt)
    ids = [output_token(fingerprint, i, SEED, MODEL.vocab_size) for i in range(tokens)]
    return WordTokenizer(MODEL.vocab_size).decode(ids)


def _real_kv_bytes(before: dict, after: dict, link: str) -> int:
    return after[link]["up"]["bytes"] - before[link]["up"]["bytes"]


def assert_wan_bytes_match(pdd: dict, real: int) -> None:
    """Emulated WAN bytes in the stats / byte_scale is what the link carried, plus msgpack framing."""
    assert_at_least(real, pdd["wan_bytes"] / BYTE_SCALE, "real KV bytes through wan-link")
    assert_at_most(real, pdd["wan_bytes"] / BYTE_SCALE * 1.01 + 4096, "real KV bytes through wan-link")


def test_the_compose_file_is_valid_and_isolates_the_datacenters(stack):
    config = json.loads(stack.compose("--profile", "load", "--profile", "chaos", "--profile", "netem",
                                      "config", "--format", "json"))
    networks, services = config["networks"], config["services"]
    assert networks["dc-a"].get("internal") and networks["dc-b"].get("internal")
    assert not networks["front"].get("internal")
    attached = {name: set(service.get("networks") or {}) for name, service in services.items()}
    assert attached["wan-link"] == {"dc-a", "dc-b"} and attached["router"] == {"front", "dc-a"}
    assert attached["main-decode"] == {"dc-b"} and all("dc-b" not in attached[s] for s in ("prefill", "relay-decode"))
    assert services["router"]["ports"][0]["target"] == 8000
    for name in ("router", "prefill", "relay-decode", "main-decode", "wan-link", "rdma-link"):
        assert not services[name]["healthcheck"].get("disable"), name
    assert services["wan-netem"]["network_mode"] == "service:wan-link"


def test_containers_of_one_datacenter_cannot_even_name_the_other(stack):
    stack.up(*PDD)

    def reachable(service: str, *names: str) -> set[str]:
        code = (f"import socket\nfor name in {list(names)!r}:\n"
                "    try:\n        socket.getaddrinfo(name, 1)\n        print(name)\n    except OSError:\n        pass")
        return set(stack.python(service, code).split())

    assert reachable("prefill", "main-decode", "relay-decode", "wan-link") == {"relay-decode", "wan-link"}
    assert reachable("main-decode", "prefill", "relay-decode", "router", "wan-link") == {"wan-link"}
    assert reachable("wan-link", "prefill", "main-decode") == {"prefill", "main-decode"}


def test_pdd_long_fresh_prompt_goes_p_rld_md_with_every_wan_byte_through_wan_link(stack):
    stack.up(*PDD)
    prompt = _prompt(30000, 1)  # 3.9 GB of KV: about 3 s over the 10 Gbit/s WAN
    before = stack.wan_stats()
    outcome = stream_completion(stack.port, prompt, 700)
    after = stack.wan_stats()
    assert outcome.error is None and outcome.broken is None, outcome
    pdd = outcome.pdd
    assert pdd["pipeline"] == "P-RLD-MD" and pdd["rld_tokens"] > 0 and pdd["md_tokens"] > 0
    assert pdd["rld_tokens"] + pdd["md_tokens"] == 700 and outcome.text == expected_text(prompt, 700)
    assert pdd["wan_bytes"] == len(prompt) * KV
    assert_wan_bytes_match(pdd, _real_kv_bytes(before, after, "prefill-to-main-decode"))
    # gRPC crossed too: router and prefill to main decode, main decode's handoff pulls from the relay.
    for route in ("dc-a-to-main-decode-grpc", "dc-b-to-relay-decode-grpc"):
        assert _real_kv_bytes(before, after, route) > 0, route


def test_the_chaos_service_changes_the_wan_while_the_mesh_runs(stack):
    stack.up(*PDD)
    baseline = stream_completion(stack.port, _prompt(2000, 2), 4)
    try:
        stack.compose("--profile", "chaos", "run", "--rm", "chaos", "set", "delay=400ms", timeout=180)
        config = stack.get_json("wan-link", _kv_link(stack)["control_port"], "/config", token=True)
        assert config["up"]["delay"] == pytest.approx(0.4) and config["up"]["rate"] == pytest.approx(10e9 / BYTE_SCALE)
        slowed = stream_completion(stack.port, _prompt(2000, 3), 4)
    finally:
        stack.compose("--profile", "chaos", "run", "--rm", "chaos", "set", "delay=5ms", timeout=180)
    assert baseline.error is None and slowed.error is None and slowed.broken is None, slowed
    # At least the KV transfer's one-way delay grew by 395 ms (control routes add more round trips).
    assert_at_least(slowed.first_token_s - baseline.first_token_s, 0.39, "TTFT growth after delay=400ms")


# From the router's container (on dc-a with prefill and the links): prefill's Drain over gRPC and a
# partition of the WAN, both without a token, as any container of the datacenter could send them.
ATTACK = """
import asyncio, json, os, urllib.error, urllib.request
import grpc
from services.rpc import pb, pb_grpc

async def drain():
    async with grpc.aio.insecure_channel("{grpc}") as channel:
        try:
            await pb_grpc.PrefillStub(channel).Drain(pb.Empty(), timeout=10)
            return "OK"
        except grpc.aio.AioRpcError as exc:
            return exc.code().name

def partition():
    request = urllib.request.Request("{control}/partition", data=b'{{"mode": "reject"}}', method="POST",
                                     headers={{"Content-Type": "application/json"}})
    try:
        return urllib.request.urlopen(request, timeout=10).status
    except urllib.error.HTTPError as exc:
        return exc.code

print(json.dumps({{"drain": asyncio.run(drain()), "partition": partition(),
                  "link_token_here": os.path.exists("/run/pdd-emu/link/token")}}))
"""


def test_control_calls_without_the_tokens_the_stack_made_are_refused(stack):
    stack.up(*PDD)
    plan = stack.plan()
    prefill = next(s for s in plan["services"] if s["name"] == "prefill")
    link = _kv_link(stack)
    answer = json.loads(stack.python("router", ATTACK.format(
        grpc=f"{prefill['host']}:{prefill['grpc_port']}", control=f"http://{link['host']}:{link['control_port']}")))
    assert answer == {"drain": "UNAUTHENTICATED", "partition": 401, "link_token_here": False}
    metrics = stack.python("prefill", "import urllib.request; print(urllib.request.urlopen("
                                      f"'http://127.0.0.1:{prefill['http_port']}/metrics').read().decode())")
    assert 'pdd_rpc_unauthenticated_total{method="/pdd.v1.Prefill/Drain"} 1.0' in metrics
    served = stream_completion(stack.port, _prompt(500, 5), 8)  # nothing drained, nothing partitioned
    assert served.error is None and served.broken is None and served.text == expected_text(_prompt(500, 5), 8)


def _kv_link(stack) -> dict:
    return next(l for l in stack.plan()["links"] if l["name"] == "prefill-to-main-decode")


def test_the_netem_profile_shapes_in_the_kernel_or_says_in_one_line_why_not(stack):
    stack.up(*PDD)
    stack.compose("--profile", "netem", "up", "-d", "--no-deps", "wan-netem", timeout=300)
    try:
        deadline, lines = time.monotonic() + 120, []
        while not lines and time.monotonic() < deadline:
            logs = stack.container("wan-netem").logs().decode(errors="replace")
            lines = [line for line in logs.splitlines() if "kernel netem" in line]
        assert len(lines) == 1, f"wan-netem said nothing decisive within 120 s:\n{logs}"
        delay = stack.get_json("wan-link", _kv_link(stack)["control_port"], "/config", token=True)["up"]["delay"]
        if "unavailable" in lines[0]:
            assert delay == pytest.approx(0.005), lines[0]  # userspace keeps shaping
        else:
            assert "kernel netem shapes" in lines[0] and delay == 0, lines[0]
    finally:
        stack.compose("--profile", "netem", "rm", "--stop", "--force", "wan-netem", timeout=120)


def test_pd_cross_streams_exact_tokens_with_its_kv_through_wan_link(stack):
    stack.up(*PD_CROSS)
    prompt = _prompt(3000, 4)
    before = stack.wan_stats()
    outcome = stream_completion(stack.port, prompt, 24)
    after = stack.wan_stats()
    assert outcome.error is None and outcome.broken is None, outcome
    assert outcome.pdd["pipeline"] == "P-D" and outcome.pdd["wan_bytes"] == len(prompt) * KV
    assert outcome.text == expected_text(prompt, 24)
    assert_wan_bytes_match(outcome.pdd, _real_kv_bytes(before, after, "prefill-to-decode"))


def test_killing_main_decode_mid_stream_fails_the_request_clearly_and_up_recovers(stack):
    stack.up(*PD_CROSS)
    prompt, streaming = _prompt(2000, 5), threading.Event()
    result: dict[str, Outcome] = {}

    def watch(outcome: Outcome) -> None:
        if len(outcome.texts) >= 50:
            streaming.set()

    client = threading.Thread(target=lambda: result.setdefault(
        "outcome", stream_completion(stack.port, prompt, 5000, deadline_s=150, on_token=watch)))
    client.start()
    assert streaming.wait(90), "the stream never reached 50 tokens"
    stack.container("main-decode").kill()
    killed_at = time.monotonic()
    client.join(150)
    assert not client.is_alive(), "the request hung after main decode died"
    outcome = result["outcome"]
    assert outcome.broken is None, outcome.broken  # an explicit error event or a full answer, never a cut stream
    assert outcome.error is not None or len(outcome.texts) == 5000
    assert_at_most(time.monotonic() - killed_at, 95, "seconds from the kill to the end of the request")
    assert expected_text(prompt, 5000).startswith(outcome.text)  # what did arrive was exact
    stack.compose("up", "-d", "--wait", "--wait-timeout", "300", timeout=360)
    # Callers' gRPC channels retry with backoff after the outage, so the first answers may be UNAVAILABLE.
    deadline, recovered = time.monotonic() + RECOVERY_S, Outcome(error="none sent")
    while recovered.error is not None and time.monotonic() < deadline:
        recovered = stream_completion(stack.port, _prompt(1000, 6), 16, deadline_s=60)
        if recovered.error is not None:
            time.sleep(0.5)  # poll interval, not synchronisation
    assert recovered.error is None and recovered.broken is None, f"not recovered in {RECOVERY_S} s: {recovered}"
    # Then every request works: more of them than prefill keeps KV connections (4), none trusted from before.
    for salt in range(7, 13):
        again = stream_completion(stack.port, _prompt(1000, salt), 16, deadline_s=60)
        assert again.error is None and again.broken is None, (salt, again)
        assert again.pdd["pipeline"] == "P-D" and again.text == expected_text(_prompt(1000, salt), 16)
