"""The links' control API of a running pdd-mini (`pdd-emu up`): a local process without the link token
can neither partition nor reconfigure the WAN, and the token is in an owner-only file named to the links
and the router by its path only.

Before the token, any local process could POST /partition to a running mesh's WAN link.
"""

from __future__ import annotations

import json
import stat
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from services.chaos.outcomes import FaultFreeText
from services.credentials import LINK_TOKEN_FILE
from services.launcher.processes import keeper_status, read_state
from services.profiles import load_model
from tests.integration.mesh import plan_of, running_mesh
from tests.integration.test_mesh_modes import _stream

pytestmark = pytest.mark.integration

TEXT = FaultFreeText(7, load_model("llama3-8b").vocab_size)  # pdd-mini's seed
PROMPT = [(i * 7919) % 50000 for i in range(2000)]  # enough KV to cross the WAN in many frames
OUTPUT = 48  # long enough for main decode to take over: the KV crosses the WAN


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("link-control")
    with running_mesh("pdd-mini", run_dir) as url:
        yield url, run_dir


def _call(url: str, method: str, token: str | None = None, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _links(run_dir: Path) -> dict[str, str]:
    return {link["name"]: f"http://{link['host']}:{link['control_port']}" for link in plan_of(run_dir)["links"]}


def test_an_unauthenticated_partition_is_refused_and_the_wan_keeps_carrying(mesh):
    url, run_dir = mesh
    token = (run_dir / LINK_TOKEN_FILE).read_text()
    links = _links(run_dir)
    wan = links["prefill-to-main-decode"]
    status, config = _call(f"{wan}/config", "GET", token)
    assert status == 200
    partition = {"mode": "blackhole", "direction": "both", "duration": "60s"}
    for base in links.values():
        for given in (None, "", "wrong", token[:-1], token + "x"):
            assert _call(f"{base}/partition", "POST", given, partition)[0] == 401, (base, given)
            assert _call(f"{base}/config", "PATCH", given, {"both": {"rate": "1kbit"}})[0] == 401, (base, given)
            assert _call(f"{base}/stats", "GET", given)[0] == 401, (base, given)
        assert _call(f"{base}/health", "GET")[0] == 200  # the keeper's liveness probe needs no token
    assert _call(f"{wan}/config", "GET", token) == (200, config)  # nothing changed

    before = _call(f"{wan}/stats", "GET", token)[1]["up"]["bytes"]
    text, _ = _stream(url, PROMPT, OUTPUT)
    assert text == TEXT.text(TEXT.ids(PROMPT, OUTPUT))
    assert _call(f"{wan}/stats", "GET", token)[1]["up"]["bytes"] > before


def test_the_link_token_is_in_an_owner_only_file_and_on_no_command_line_or_log(mesh):
    _, run_dir = mesh
    path = run_dir / LINK_TOKEN_FILE
    token = path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(token) >= 32
    _, started = read_state(run_dir)
    pids = [p.pid for p in started] + [keeper_status(run_dir, p.name)["child_pid"] for p in started]
    for pid in pids:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        assert token.encode() not in cmdline and b"--control-token" not in cmdline, pid
    for log in (run_dir / "logs").glob("*.log"):
        assert token not in log.read_text(errors="replace"), log.name


def test_with_the_token_the_wan_partitions_and_heals(mesh):
    _, run_dir = mesh
    token = (run_dir / LINK_TOKEN_FILE).read_text()
    wan = _links(run_dir)["prefill-to-main-decode"]
    status, _ = _call(f"{wan}/partition", "POST", token, {"mode": "reject", "direction": "both", "duration": "30s"})
    assert status == 200
    assert _call(f"{wan}/partition", "DELETE", token)[0] == 200
