"""A client that hangs up frees its request everywhere: router, relay, main decode and the WAN transfer."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from tests.integration.mesh import get_json, plan_of, running_mesh
from tests.tolerance import assert_at_most

pytestmark = pytest.mark.integration

MODEL = "llama3-8b"


def _stats(run_dir: Path) -> dict[str, dict]:
    return {s["name"]: get_json(f"http://{s['host']}:{s['http_port']}/stats")
            for s in plan_of(run_dir)["services"] if s.get("http_port")}


def _busy(stats: dict[str, dict]) -> list[str]:
    """What still holds the request: the at-rest check of docs/reliability.md, less the links."""
    held = []
    for name, s in stats.items():
        if s.get("inflight"):
            held.append(f"{name} inflight {s['inflight']}")
        for instance, counters in s.get("instances", {}).items():
            held += [f"{instance} {k} {counters[k]}" for k in ("running", "waiting", "kv_blocks_used") if counters[k]]
        held += [f"{name} {k} {s[k]}" for k in ("transfers_pending", "relayed", "transfers_in_flight") if s.get(k)]
    return held


def _send_and_hang_up(url: str, prompt: list[int], max_tokens: int, run_dir: Path, stream: bool = False) -> float:
    """POST a request, wait until the mesh works on it, close the socket; seconds until at rest."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "stream": stream}).encode()
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    deadline = time.monotonic() + 30
    while not any("running" in h for h in _busy(_stats(run_dir))):  # a decoder is generating it
        assert time.monotonic() < deadline, "the request never started"
        time.sleep(0.05)
    sock.close()
    hung_up = time.monotonic()
    while held := _busy(_stats(run_dir)):
        assert time.monotonic() < hung_up + 30, f"still held 30 s after the hang-up: {held}"
        time.sleep(0.02)
    return time.monotonic() - hung_up


def test_a_non_streamed_request_is_cancelled_end_to_end_when_its_client_hangs_up(tmp_path):
    with running_mesh("pdd-mini", tmp_path) as url:
        # 30000 fresh tokens: P-RLD-MD, the relay decoding while 3.9 GB of KV crosses the WAN (about 3 s).
        relayed = _send_and_hang_up(url, [(i * 7919 + 5) % 50000 for i in range(30000)], 4000, tmp_path)
        # A short prompt: P-MD, main decode generating 4000 tokens (about 40 s) for nobody.
        direct = _send_and_hang_up(url, [(i * 31 + 7) % 50000 for i in range(300)], 4000, tmp_path)
        # A stream whose reader goes away: the same, and no ERROR traceback in the router's log.
        streamed = _send_and_hang_up(url, [(i * 37 + 9) % 50000 for i in range(300)], 4000, tmp_path, stream=True)
        router = _stats(tmp_path)["router"]
        logs = (tmp_path / "logs" / "router.log").read_text()
    print(f"at rest {relayed:.3f} s (P-RLD-MD), {direct:.3f} s (P-MD), {streamed:.3f} s (streamed) after the hang-up")
    assert_at_most(relayed, 1.0, what="seconds from the hang-up to a mesh at rest (P-RLD-MD)")
    assert_at_most(direct, 1.0, what="seconds from the hang-up to a mesh at rest (P-MD)")
    assert_at_most(streamed, 1.0, what="seconds from the hang-up to a mesh at rest (streamed)")
    assert router["cancelled"] == 3 and router["completed"] == 0 and router["failed"] == 0
    assert logs.count("the client hung up") == 3 and "Traceback" not in logs and "ERROR" not in logs
