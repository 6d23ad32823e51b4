"""Degraded modes on a real pdd-mini: the relay serves while main decode is down, main decode serves
when the relay's transfer is late, the decode pool prefills itself while no prefill pool answers.
Each one named in the `pdd` stats and counted in /metrics."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import time
import urllib.request

import pytest

from services.chaos.outcomes import FaultFreeText
from services.launcher.processes import keeper_status, read_state
from services.profiles import load_model
from tests.integration.mesh import get_json, link_control, plan_of, running_mesh
from tests.integration.test_mesh_modes import _stream

pytestmark = pytest.mark.integration

TEXT = FaultFreeText(7, load_model("llama3-8b").vocab_size)  # pdd-mini's seed


def _prompt(n: int, salt: int) -> list[int]:
    return [(i * 7919 + salt * 104729) % 50000 for i in range(n)]


def _metric(url: str, kind: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    line = next((l for l in text.splitlines() if l.startswith(f'pdd_degraded_requests_total{{kind="{kind}"}}')), None)
    return float(line.split()[-1]) if line else 0.0


def _control(run_dir, kind: str, method: str, path: str, body: dict | None = None) -> dict:
    url, auth = link_control(run_dir, kind)
    request = urllib.request.Request(f"{url}{path}", method=method, headers=auth,
                                     data=json.dumps(body).encode() if body is not None else None)
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


def test_with_main_decode_down_the_relay_serves_whole_requests(tmp_path):
    with running_mesh("pdd-mini", tmp_path) as url:
        _kill_for_good(tmp_path, "main-decode")
        results = [(_stream(url, _prompt(n, salt), 12), _prompt(n, salt)) for salt, n in ((1, 300), (2, 8000))]
        counted = _metric(url, "main-decode-down")
    for (text, pdd), prompt in results:
        assert text == TEXT.text(TEXT.ids(prompt, 12))
        assert pdd["pipeline"] == "P-RLD" and pdd["fallback"] and pdd["degraded"] == "main-decode-down"
        assert pdd["rld_tokens"] == 12 and pdd["md_tokens"] == 0 and pdd["wan_bytes"] == 0
    assert counted == 2


def _kill_for_good(run_dir, name: str) -> None:
    """kill -9 of a service and its keeper, so nobody restarts it; returns once the service is gone."""
    _, started = read_state(run_dir)
    keeper = next(p for p in started if p.name == name)
    child = keeper_status(run_dir, name)["child_pid"]
    os.killpg(keeper.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_p_md_request_whose_main_decode_dies_before_its_first_token_is_served_by_the_relay(tmp_path):
    # The WAN holds main decode's KV, so the request is waiting there when main decode goes for good.
    with running_mesh("pdd-mini", tmp_path) as url:
        md = next(s for s in plan_of(tmp_path)["services"] if s["name"] == "main-decode")
        _control(tmp_path, "wan", "POST", "/partition", {"mode": "blackhole", "direction": "both"})
        prompt = _prompt(300, 6)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer = pool.submit(_stream, url, prompt, 12)
            deadline = time.monotonic() + 30
            while get_json(f"http://{md['host']}:{md['http_port']}/stats")["transfers_pending"] == 0:
                assert time.monotonic() < deadline and not answer.done(), "the request never waited at main decode"
                time.sleep(0.05)
            _kill_for_good(tmp_path, "main-decode")
            text, pdd = answer.result(timeout=90)
        counted = _metric(url, "main-decode-failed")
    assert text == TEXT.text(TEXT.ids(prompt, 12))
    assert pdd["pipeline"] == "P-RLD" and pdd["degraded"] == "main-decode-failed" and pdd["rld_tokens"] == 12, pdd
    assert pdd["policy"]["reason"] == "main decode failed before its first token"
    assert pdd["degraded_cause"].startswith("decode failed"), pdd  # main decode's stream, cut by the kill
    assert counted == 1


@pytest.mark.parametrize("scenario", ["pdd-mini", "pd-cross-mini"])
def test_with_the_only_prefill_pool_down_the_decode_pool_prefills_itself(tmp_path, scenario):
    # A short prompt (P-MD, or P-D) and a long fresh one (which PDD would send P-RLD-MD): neither may be a 503.
    with running_mesh(scenario, tmp_path) as url:
        _kill_for_good(tmp_path, "prefill")
        results = [(_stream(url, _prompt(n, salt), 12), _prompt(n, salt)) for salt, n in ((4, 300), (5, 8000))]
        counted = _metric(url, "prefill-unreachable")
    for (text, pdd), prompt in results:
        assert text == TEXT.text(TEXT.ids(prompt, 12))
        assert pdd["pipeline"] == "colocated" and pdd["degraded"] == "prefill-unreachable", pdd
        assert pdd["md_tokens"] == 12 and pdd["rld_tokens"] == 0 and pdd["wan_bytes"] == 0
    assert counted == 2


def test_a_late_relay_transfer_is_served_by_main_decode_which_holds_the_kv(tmp_path):
    # The relay's RDMA link holds every byte; its transfer misses the 6 s deadline, while main decode's
    # KV (30K fresh tokens, about 3 s over the WAN) lands in time.
    with running_mesh("pdd-mini", tmp_path, "transfer_timeout_s=6s") as url:
        _control(tmp_path, "rdma", "POST", "/partition", {"mode": "blackhole", "direction": "both"})
        prompt = _prompt(30000, 3)
        text, pdd = _stream(url, prompt, 16)
        _control(tmp_path, "rdma", "DELETE", "/partition")
        counted = _metric(url, "relay-transfer-deadline")
    assert text == TEXT.text(TEXT.ids(prompt, 16))
    assert pdd["pipeline"] == "P-RLD-MD" and pdd["degraded"] == "relay-transfer-deadline", pdd
    assert pdd["rld_tokens"] == 0 and pdd["md_tokens"] == 16
    assert counted == 1
