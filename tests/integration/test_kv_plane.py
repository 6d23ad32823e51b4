"""The KV plane of a running pdd-mini against a local attacker on main decode's KV port.

Before the per-connection shares, 34 connections each holding a 1 MiB frame one byte short filled the
32 MiB budget and the next P-MD request took 118.5 s; 100,000 frames for made-up request ids left
transfers_pending at 100,000 and the process 75 MB larger, for good.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import pytest

from services.kv.frames import KvFrame
from services.kv.receiver import ReceiverLimits
from tests.integration.mesh import get_json, plan_of, running_mesh
from tests.integration.test_control_plane import RSS_BOUND_BYTES, _rss, _timed_probe
from tests.tolerance import assert_at_most
from tests.waiting import WAIT_S

pytestmark = pytest.mark.integration

TRANSFER_TIMEOUT_S = 6.0  # the mesh's transfer deadline: frames no request claims expire after it
ORPHANS = 100_000

# Every connection a receiver admits, each holding a frame one byte short of its share, until stdin closes.
STALLER = """
import socket, sys
from services.kv.frames import KvFrame
port, peers, size = (int(a) for a in sys.argv[1:4])
socks = []
for i in range(peers):
    frame = KvFrame(f"stall-{i}", 0, 1, bytes(size)).encode()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(frame[:-1])
    socks.append(sock)
print("held", flush=True)
sys.stdin.read()
"""


# Sends stdin's frames on one connection and reads the acknowledgements to the receiver's end: a socket
# closed with unread bytes is reset, and a reset throws away what the receiver has not read yet.
FLOODER = """
import socket, sys
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
sock.sendall(sys.stdin.buffer.read())
sock.shutdown(socket.SHUT_WR)
while sock.recv(65536):
    pass
"""


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("kv-plane")
    with running_mesh("pdd-mini", run_dir, f"transfer_timeout_s={TRANSFER_TIMEOUT_S:g}s") as url:
        md = next(s for s in plan_of(run_dir)["services"] if s["name"] == "main-decode")
        yield url, run_dir, md


def _md_stats(md: dict) -> dict:
    return get_json(f"http://{md['host']}:{md['http_port']}/stats")


def _probes(url: str, first_salt: int, count: int = 4) -> list[float]:
    return [_timed_probe(url, salt) for salt in range(first_salt, first_salt + count)]


def test_connections_holding_frames_one_byte_short_do_not_starve_the_mesh(mesh):
    url, run_dir, md = mesh
    baseline = statistics.median(_probes(url, 1000))
    limits = ReceiverLimits()
    share = limits.buffer_bytes // limits.max_connections
    staller = subprocess.Popen([sys.executable, "-c", STALLER, str(md["kv_port"]), str(limits.max_connections),
                                str(share - 100)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert staller.stdout.readline().strip() == "held"
        held = _md_stats(md)
        during = _probes(url, 1100)
    finally:
        staller.stdin.close()
        staller.wait(timeout=WAIT_S)
    print(f"P-MD probe: baseline {baseline:.3f} s, with every KV connection held {max(during):.3f} s; "
          f"{held['kv_connections']} connections, {held['kv_buffered_bytes']} bytes buffered")
    assert held["kv_buffered_bytes"] <= limits.buffer_bytes
    assert_at_most(max(during), baseline + 1.0, "a probe's latency while the KV connections are held")
    after = _md_stats(md)
    assert after["kv_connections_evicted"] >= 1 and after["kv_buffered_bytes"] == 0


def test_frames_for_made_up_requests_expire_as_orphans_and_leave_nothing(mesh):
    url, run_dir, md = mesh
    baseline = statistics.median(_probes(url, 2000))
    rss_before = _rss(run_dir, "main-decode")
    before = _md_stats(md)
    flood = b"".join(KvFrame(f"made-up-{i}", 0, 2, b"x" * 16).encode() for i in range(ORPHANS))
    sender = subprocess.Popen([sys.executable, "-c", FLOODER, str(md["kv_port"])], stdin=subprocess.PIPE)
    sender.communicate(flood, timeout=60)
    assert sender.returncode == 0
    during = _probes(url, 2100)
    flooded = _md_stats(md)
    deadline = time.monotonic() + TRANSFER_TIMEOUT_S + WAIT_S
    while (stats := _md_stats(md))["orphan_transfers_expired"] - before["orphan_transfers_expired"] < ORPHANS:
        assert time.monotonic() < deadline, f"not all expired: {stats}"
        time.sleep(0.2)
    growth = _rss(run_dir, "main-decode") - rss_before
    print(f"P-MD probe: baseline {baseline:.3f} s, after the flood {max(during):.3f} s; pending at the flood's "
          f"end {flooded['transfers_pending']}, RSS growth {growth / 2**20:.1f} MiB")
    assert flooded["transfers_pending"] <= 4096 + 1  # UNCLAIMED_KEPT, and a probe's own
    assert stats["transfers_pending"] == 0
    assert stats["orphan_frames"] - before["orphan_frames"] == ORPHANS
    assert_at_most(max(during), baseline + 1.0, "a probe's latency after the flood")
    assert_at_most(growth, RSS_BOUND_BYTES, "main decode's RSS growth")
