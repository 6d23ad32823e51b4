"""Hostile requests at a real pdd-mini mesh: each is refused by the bound it hits, and nobody else waits.

The attacks (docs/reliability.md, "Hostile requests: bound and test"): stop strings of 50 KB, 50
stop strings over 16,000 tokens, a batch of 2,000 prompts, the logprobs of a long prompt echoed 128
times, and a client id shaped like a batch's job. For each, a probe sent at the same moment answers
within 1 s of its baseline, the router's counts come back to rest, and the attacker gets a 400
naming the limit (or, for the id, both requests are served).
"""

from __future__ import annotations

import json
import statistics
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from services.chaos.soak import RSS_GROWTH_BOUND_KIB
from services.launcher.processes import keeper_status
from tests.integration.mesh import get_json, plan_of, running_mesh
from tests.tolerance import assert_at_most

pytestmark = pytest.mark.integration

MODEL = "llama3-8b"
PROBE = {"prompt": "a probe from another client", "max_tokens": 8}


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("bounds")
    with running_mesh("pdd-mini", run_dir) as url:
        yield url, run_dir


def _post(url: str, fields: dict, request_id: str | None = None) -> tuple[int, dict, float]:
    """(status, body, seconds) of one completion."""
    body = json.dumps({"model": MODEL, **fields}).encode()
    headers = {"content-type": "application/json", **({"x-request-id": request_id} if request_id else {})}
    request = urllib.request.Request(f"{url}/v1/completions", data=body, headers=headers, method="POST")
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read()), time.perf_counter() - start
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), time.perf_counter() - start


def _held(run_dir: Path) -> list[str]:
    """What the mesh still holds: the router's in-flight jobs and ids, the engines' requests."""
    held = []
    for service in plan_of(run_dir)["services"]:
        if not service.get("http_port"):
            continue
        stats = get_json(f"http://{service['host']}:{service['http_port']}/stats")
        held += [f"{service['name']} inflight {stats['inflight']}"] if stats.get("inflight") else []
        for instance, counters in stats.get("instances", {}).items():
            held += [f"{instance} {k} {counters[k]}" for k in ("running", "waiting") if counters[k]]
    return held


def _router_rss_kib(run_dir: Path) -> int:
    status = Path(f"/proc/{keeper_status(run_dir, 'router')['child_pid']}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


def _at_rest(run_dir: Path, rss_before_kib: int) -> None:
    """Nothing held, and the router no larger than the soak allows a process to grow (docs/reliability.md)."""
    deadline = time.monotonic() + 10
    while held := _held(run_dir):
        assert time.monotonic() < deadline, f"still held 10 s after the attack: {held}"
        time.sleep(0.05)
    grown_kib = _router_rss_kib(run_dir) - rss_before_kib
    print(f"router RSS grew {grown_kib} KiB since the baseline")
    assert_at_most(grown_kib, RSS_GROWTH_BOUND_KIB, "router RSS growth, KiB")


@pytest.fixture(scope="module")
def baseline(mesh) -> tuple[float, int]:
    """A probe's latency on a quiet mesh, and the router's RSS then."""
    url, run_dir = mesh
    _post(url, PROBE)  # the first request warms the prefix caches and the channels
    return statistics.median(_post(url, PROBE)[2] for _ in range(3)), _router_rss_kib(run_dir)


ATTACKS = {
    "a 50 KB stop, n=8, 8000 tokens": (
        {"prompt": "tell me", "stop": ["Q" * 50_000, "Q0Z", "Q1Z"], "max_tokens": 8000, "n": 8},
        "stop", "at most 1000 characters"),
    "50 short stops over 16,000 tokens": (
        {"prompt": "tell me", "stop": [f"Q{i}Z" for i in range(50)], "max_tokens": 16_000},
        "stop", "at most 4 stop sequences"),
    "a batch of 2,000 prompts": (
        {"prompt": [f"prompt number {i}" for i in range(2000)], "max_tokens": 16},
        "prompt", "at most 128 (prompts x n)"),
    "echo with logprobs of a 10,000-id prompt, n=128": (
        {"prompt": [(i * 7919 + 5) % 50_000 for i in range(10_000)], "max_tokens": 1, "n": 128, "echo": True,
         "logprobs": 5},
        "logprobs", "a request may ask for at most 8192"),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_an_attack_gets_a_400_naming_its_bound_while_a_probe_is_served_as_before(mesh, baseline, name):
    (url, run_dir), (baseline, rss_kib) = mesh, baseline
    fields, param, fragment = ATTACKS[name]
    with ThreadPoolExecutor(9) as pool:
        attacks = [pool.submit(_post, url, fields) for _ in range(8)]  # eight attackers at once
        probe = pool.submit(_post, url, PROBE)
        answers = [a.result() for a in attacks]
        probe_status, _, probe_s = probe.result()
    for status, body, seconds in answers:
        assert status == 400 and fragment in body["error"]["message"] and body["error"]["param"] == param, body
        assert_at_most(seconds, 1.0, f"seconds until the attacker's 400 ({name})")
    print(f"{name}: 400s within {max(a[2] for a in answers):.3f} s, probe {probe_s:.3f} s (baseline {baseline:.3f} s)")
    assert probe_status == 200
    assert_at_most(probe_s, baseline + 1.0, f"probe latency during the attack ({name}), baseline {baseline:.3f} s")
    _at_rest(run_dir, rss_kib)


def test_a_client_id_shaped_like_a_batch_job_and_the_batch_both_finish(mesh, baseline):
    (url, run_dir), (baseline, rss_kib) = mesh, baseline
    batch = {"prompt": ["first of the batch", "second of the batch"], "max_tokens": 64}
    with ThreadPoolExecutor(2) as pool:
        batched = pool.submit(_post, url, batch, "X")
        deadline = time.monotonic() + 10
        while not any("running" in h for h in _held(run_dir)):  # the batch's jobs are decoding
            assert time.monotonic() < deadline, "the batch never started"
            time.sleep(0.02)
        lone = pool.submit(_post, url, PROBE, "X-0")  # the id the batch's first job had before
        (b_status, b_body, b_s), (l_status, l_body, l_s) = batched.result(), lone.result()
    print(f"batch X {b_s:.3f} s beside X-0 {l_s:.3f} s (probe baseline {baseline:.3f} s)")
    assert (b_status, l_status) == (200, 200), (b_body, l_body)
    assert [c["finish_reason"] for c in b_body["choices"]] == ["length", "length"] and l_body["id"] == "cmpl-X-0"
    assert_at_most(l_s, baseline + 1.0, "latency of a client named like the batch's job")
    assert_at_most(b_s, 10.0, "seconds for the batch beside a client named like its job (its job hung 150 s)")
    status, body, _ = _post(url, PROBE, "X#0")
    assert status == 400 and body["error"]["code"] == "invalid_request_id"
    _at_rest(run_dir, rss_kib)
    router = next(s for s in plan_of(run_dir)["services"] if s["name"] == "router")
    stats = get_json(f"http://{router['host']}:{router['http_port']}/stats")
    assert stats["inflight"] == 0 and stats["failed"] == 0
