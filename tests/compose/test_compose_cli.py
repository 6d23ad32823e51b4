"""`pdd-emu compose plan | chaos | netem | tokens` and `pdd-emu serve` for link runners, without Docker."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from services.cli import main
from services.launcher.link_host import LinkHost
from services.scenario.plan import MeshPlan
from tests.compose.local_plan import TOKEN, distinct_free_ports, local_plan, saved

DEADLINE_S = 30


def _pdd_emu(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "services.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def test_plan_reads_the_environment_and_flags_win(tmp_path, monkeypatch):
    monkeypatch.setenv("PDD_EMU_SCENARIO", "pd-cross-mini")
    monkeypatch.setenv("PDD_EMU_SET", "wan.delay_s=20ms  wan.rate_bps=5gbit")
    assert main(["compose", "plan", "--set", "wan.delay_s=30ms", "--out", str(tmp_path / "p.json")]) == 0
    plan = MeshPlan.load(tmp_path / "p.json")
    assert plan.scenario.name == "pd-cross-mini"
    assert plan.scenario.wan.delay_s == pytest.approx(0.03) and plan.scenario.wan.rate_bps == 5e9


def test_plan_refuses_a_single_datacenter_scenario(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["compose", "plan", "--scenario", "colocated-mini", "--out", str(tmp_path / "p.json")])
    assert exit_.value.code == 2 and "run it with `pdd-emu up`" in capsys.readouterr().err


def test_serve_refuses_to_start_a_pool_without_the_deployment_token(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PDD_EMU_MESH_TOKEN")}
    proc = _pdd_emu("serve", "--plan", str(saved(local_plan("pdd-mini"), tmp_path)), "--service", "prefill", env=env)
    _, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 2 and "no deployment token: set $PDD_EMU_MESH_TOKEN" in err


def test_tokens_are_made_once_readable_by_their_owner_only_and_never_printed(tmp_path, capsys):
    mesh, link = tmp_path / "mesh" / "token", tmp_path / "link" / "token"
    assert main(["compose", "tokens", str(mesh), str(link)]) == 0
    first = {path: path.read_text() for path in (mesh, link)}
    assert first[mesh] != first[link] and all(len(token) == 48 for token in first.values())
    assert all(os.stat(path).st_mode & 0o777 == 0o600 for path in first)
    assert main(["compose", "tokens", str(mesh), str(link)]) == 0  # a later start keeps them
    assert {path: path.read_text() for path in first} == first
    out = capsys.readouterr().out
    assert out.count("tokens: made") == 2 and out.count("tokens: kept") == 2
    assert not any(token in out for token in first.values())


def test_serve_names_the_services_and_runners_when_the_name_is_unknown(tmp_path):
    proc = _pdd_emu("serve", "--plan", str(saved(local_plan("pdd-mini"), tmp_path)), "--service", "nowhere")
    _, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 2 and "runners: ['rdma-link', 'wan-link']" in err


@pytest.mark.parametrize("scenario, runner, links", [("pdd-mini", "wan-link", 6), ("pd-cross-mini", "relay-decode", 0)])  # pdd-mini: the WAN KV link, 3 gRPC and 2 feed routes
def test_serve_runs_a_runners_links_or_an_empty_container_until_sigterm(tmp_path, scenario, runner, links):
    (health_port,) = distinct_free_ports(1)
    plan = local_plan(scenario)
    env = {**os.environ, "PDD_EMU_LINK_TOKEN": TOKEN}
    proc = _pdd_emu("serve", "--plan", str(saved(plan, tmp_path)), "--service", runner, "--idle-ok",
                    "--health-port", str(health_port), env=env)
    try:
        health = _poll_json(f"http://127.0.0.1:{health_port}/health", proc)
        assert health["runner"] == runner and len(health["links"]) == links
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0, err


def _poll_json(url: str, proc: subprocess.Popen) -> dict:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode}: {proc.stderr.read()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                return json.loads(reply.read())
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"{url} not answering within {DEADLINE_S} s")


async def test_chaos_speaks_emulated_units_and_partitions_every_wan_link(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PDD_EMU_LINK_TOKEN", TOKEN)
    plan = local_plan("pdd-mini")
    path = saved(plan, tmp_path)
    host = LinkHost(plan, "wan-link", bind_host="127.0.0.1", token=TOKEN)
    await host.start()
    try:
        chaos = ["compose", "chaos", "--plan", str(path)]
        assert await asyncio.to_thread(main, [*chaos, "set", "delay=40ms", "rate=5gbit"]) == 0
        configs = {r.plan.name: r.link.config for r in host.links}
        assert configs["prefill-to-main-decode"].up.rate_bps == pytest.approx(5e9 / 1000)  # KV: bytes / byte_scale
        assert configs["dc-a-to-main-decode-grpc"].down.rate_bps == pytest.approx(5e9)  # gRPC: real size
        assert all(c.up.delay_s == c.down.delay_s == pytest.approx(0.04) for c in configs.values())
        assert await asyncio.to_thread(main, [*chaos, "partition", "--duration", "30s"]) == 0
        assert all(r.link.stats()["up"]["partition"] == "blackhole" for r in host.links)
        assert await asyncio.to_thread(main, [*chaos, "--link", "prefill-to-main-decode", "heal"]) == 0
        healed = {r.plan.name: r.link.stats()["up"]["partition"] for r in host.links}
        assert healed.pop("prefill-to-main-decode") is None and set(healed.values()) == {"blackhole"}
        capsys.readouterr()
        assert await asyncio.to_thread(main, [*chaos, "stats"]) == 0
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert {line["link"] for line in lines} == set(configs) and all("stats" in line for line in lines)
    finally:
        await host.stop()
    monkeypatch.setenv("PDD_EMU_LINK_TOKEN", "wrong")
    assert await asyncio.to_thread(main, ["compose", "chaos", "--plan", str(path), "heal"]) == 1  # unreachable now: reported, exit 1


def test_netem_falls_back_with_one_line_when_the_kernel_cannot_do_the_wan(tmp_path):
    # A normal jitter distribution needs a netem table pyroute2 cannot load: refused before any interface
    # is touched, on every kernel, so this test never shapes the machine it runs on.
    proc = _pdd_emu("compose", "netem", "--plan", str(saved(local_plan("pdd-mini"), tmp_path)))
    ready, _, _ = select.select([proc.stderr], [], [], DEADLINE_S)
    line = proc.stderr.readline() if ready else ""
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=DEADLINE_S)
    assert "kernel netem unavailable" in line and "jitter distribution 'normal'" in line
    assert "wan-link keeps shaping its 6 WAN link(s) in userspace" in line and proc.returncode == 0
