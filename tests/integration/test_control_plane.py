"""The control plane of a running pdd-mini: a local process without the deployment token can neither
drain, limit nor cancel anything, and a drain with it is undone by Resume and shown by /health and status.

Before the token, two unauthenticated Drain calls (relay and main decode) failed every request with 503
until a restart, while `status` said healthy.
"""

from __future__ import annotations

import asyncio
import stat
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import openai
import pytest

from services.chaos.outcomes import FaultFreeText
from services.launcher.processes import TOKEN_FILE, keeper_status
from services.profiles import load_model
from services.rpc import channel, pb, pb_grpc
from tests.integration.mesh import plan_of, running_mesh
from tests.integration.test_mesh_modes import _stream
from tests.tolerance import assert_at_most

pytestmark = pytest.mark.integration

TEXT = FaultFreeText(7, load_model("llama3-8b").vocab_size)  # pdd-mini's seed
ATTACK_CALLS = 200  # per method and service
RSS_BOUND_BYTES = 64 << 20  # the soak's bound on a process's growth (docs/reliability.md §Load)


def _prompt(salt: int) -> list[int]:
    return [(i * 7919 + salt * 104729) % 50000 for i in range(300)]


def _timed_probe(url: str, salt: int) -> float:
    start = time.monotonic()
    text, _ = _stream(url, _prompt(salt), 8)
    assert text == TEXT.text(TEXT.ids(_prompt(salt), 8))
    return time.monotonic() - start


def _health(service: dict) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{service['host']}:{service['http_port']}/health", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _refused_count(service: dict) -> float:
    with urllib.request.urlopen(f"http://{service['host']}:{service['http_port']}/metrics", timeout=5) as reply:
        lines = reply.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("pdd_rpc_unauthenticated_total{"))


def _rss(run_dir, name: str) -> int:
    pid = keeper_status(run_dir, name)["child_pid"]
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def _status(run_dir) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "services.cli", "status", "--run-dir", str(run_dir)],
                          capture_output=True, text=True, timeout=30)
    return done.returncode, done.stdout


async def _attack(services: dict[str, dict]) -> list[grpc.StatusCode]:
    """Drain, SetLimit and CancelTransfer without a token, ATTACK_CALLS each, 16 at a time per service."""
    codes: list[grpc.StatusCode] = []
    calls = []
    channels = []
    for name, service in services.items():
        ch = grpc.aio.insecure_channel(f"{service['host']}:{service['grpc_port']}")  # an attacker's: no token
        channels.append(ch)
        if name == "prefill":
            stub = pb_grpc.PrefillStub(ch)
            calls += [lambda s=stub: s.Drain(pb.Empty(), timeout=10),
                      lambda s=stub: s.CancelTransfer(pb.CancelRequest(request_id="x", reason="attack"), timeout=10)]
        else:
            stub = pb_grpc.DecodeStub(ch)
            calls += [lambda s=stub: s.Drain(pb.Empty(), timeout=10),
                      lambda s=stub: s.SetLimit(pb.LimitRequest(request_id="x", limit=0), timeout=10)]
    gate = asyncio.Semaphore(16 * len(services))

    async def one(call) -> None:
        async with gate:
            try:
                await call()
                codes.append(grpc.StatusCode.OK)
            except grpc.aio.AioRpcError as exc:
                codes.append(exc.code())

    try:
        await asyncio.gather(*(one(call) for call in calls for _ in range(ATTACK_CALLS)))
    finally:
        for ch in channels:
            await ch.close()
    return codes


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("control-plane")
    with running_mesh("pdd-mini", run_dir) as url:
        services = {s["name"]: s for s in plan_of(run_dir)["services"] if s["grpc_port"]}
        yield url, run_dir, services


def test_unauthenticated_control_calls_are_refused_counted_and_cost_other_clients_nothing(mesh):
    url, run_dir, services = mesh
    baseline = statistics.median(_timed_probe(url, salt) for salt in range(5))
    rss_before = {name: _rss(run_dir, name) for name in services}
    probes: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        salt = 100
        while not stop.is_set():
            probes.append(_timed_probe(url, salt))
            salt += 1

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        codes = asyncio.run(_attack(services))
    finally:
        stop.set()
        prober.join(timeout=60)
    assert set(codes) == {grpc.StatusCode.UNAUTHENTICATED}, set(codes)
    assert len(codes) == 2 * ATTACK_CALLS * len(services)
    assert probes, "no probe finished during the attack"
    print(f"probe baseline {baseline:.3f} s, during the attack max {max(probes):.3f} s over {len(probes)}")
    assert_at_most(max(probes), baseline + 1.0, "a probe's latency during the attack")
    for name, service in services.items():
        assert _health(service)[0] == 200, name  # nothing drained
        assert _refused_count(service) == 2 * ATTACK_CALLS, name
        assert_at_most(_rss(run_dir, name) - rss_before[name], RSS_BOUND_BYTES, f"{name}'s RSS growth")
    assert _status(run_dir)[0] == 0


def test_the_token_is_in_an_owner_only_file_and_on_no_command_line_or_log(mesh):
    url, run_dir, services = mesh
    path = run_dir / TOKEN_FILE
    token = path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(token) == 48
    for name in [*services, "router"]:
        pid = keeper_status(run_dir, name)["child_pid"]
        assert token.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes(), name
    for log in (run_dir / "logs").glob("*.log"):
        assert token not in log.read_text(errors="replace"), log.name


def test_drain_is_shown_by_health_and_status_and_resume_undoes_it(mesh):
    url, run_dir, services = mesh
    token = (run_dir / TOKEN_FILE).read_text()
    decodes = [services["relay-decode"], services["main-decode"]]

    async def call(method: str) -> None:
        for service in decodes:
            async with channel(f"{service['host']}:{service['grpc_port']}", token) as ch:
                await getattr(pb_grpc.DecodeStub(ch), method)(pb.Empty(), timeout=10)

    asyncio.run(call("Drain"))
    for service in decodes:
        code, body = _health(service)
        assert code == 503 and '"draining"' in body, (code, body)
    code, table = _status(run_dir)
    assert code == 1 and table.count("draining") == 2, table
    with pytest.raises(openai.APIStatusError) as refused:
        _stream(url, _prompt(500), 8)
    assert refused.value.status_code == 503 and "draining" in str(refused.value)

    asyncio.run(call("Resume"))
    for service in decodes:
        assert _health(service)[0] == 200
    assert _status(run_dir)[0] == 0
    assert _timed_probe(url, 501) > 0  # served, with its fault-free text
