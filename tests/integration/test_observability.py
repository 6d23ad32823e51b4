"""The observability profile's Prometheus config, rules and Grafana dashboard, against Debian's real prometheus.

promtool validates the compose files as shipped; then a real prometheus scrapes
a live pdd-mini mesh with the same recording rules, and every PromQL query of
every dashboard panel must return data while the mesh serves relayed and
cached traffic.
"""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.integration.mesh import plan_of, running_mesh

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
OBSERVABILITY = ROOT / "compose" / "observability"
DASHBOARD = OBSERVABILITY / "grafana" / "pdd-emu.json"
needs_prometheus = pytest.mark.skipif(shutil.which("prometheus") is None or shutil.which("promtool") is None,
                                      reason="needs Debian's prometheus package (.ci/run installs it)")


@needs_prometheus
@pytest.mark.parametrize("check, path", [("config", "prometheus.yml"), ("rules", "rules.yml")])
def test_promtool_accepts_the_shipped_files(check, path):
    result = subprocess.run(["promtool", "check", check, str(OBSERVABILITY / path)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dashboard_has_every_panel_of_a_vllm_style_board():
    dashboard = json.loads(DASHBOARD.read_text())
    titles = {panel["title"] for panel in dashboard["panels"]}
    assert {"Time To First Token", "Time Per Output Token", "E2E Request Latency", "Queue Time", "KV Cache Usage",
            "Prefix Cache Hit Rate", "WAN Throughput", "WAN Utilisation", "RLD Share Of Output Tokens",
            "Handoff Stall"} <= titles
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["model_name"]
    assert all(t["datasource"]["uid"] == "prometheus" for p in dashboard["panels"] for t in p["targets"])


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target, with Grafana's variables filled in."""
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"].replace("$model_name", "llama3-8b").replace("$__rate_interval", "30s"))
            for panel in dashboard["panels"] for target in panel["targets"]]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.loads(reply.read())


def _post(url: str, body: dict) -> None:
    request = urllib.request.Request(f"{url}/v1/completions", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as reply:
        reply.read()


def _traffic(url: str, stop: threading.Event) -> None:
    """Relayed requests (long fresh prompts hand off from RLD to MD) and repeated ones (prefix hits)."""
    salt = 0
    while not stop.is_set():
        salt += 1
        fresh = [(i * 7919 + salt * 104729) % 50000 for i in range(20000)]
        _post(url, {"model": "llama3-8b", "prompt": fresh, "max_tokens": 300})
        for _ in range(3):
            _post(url, {"model": "llama3-8b", "prompt": fresh[:4000], "max_tokens": 8})


def _prometheus_config(run_dir: Path, path: Path) -> None:
    services = plan_of(run_dir)["services"]
    targets = {"router": [], "pools": []}
    for s in services:
        if s["role"] == "router":
            targets["router"].append(f"{s['host']}:{s['http_port']}")
        elif s.get("grpc_port"):
            targets["pools"].append(f"{s['host']}:{s['http_port']}")
    jobs = "".join(f"  - job_name: {job}\n    static_configs:\n      - targets: {json.dumps(hosts)}\n"
                   for job, hosts in targets.items())
    path.write_text(f"global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n"
                    f"  - {OBSERVABILITY / 'rules.yml'}\nscrape_configs:\n{jobs}")


def _has_data(api: str, query: str) -> bool:
    result = _get(f"{api}/query?{urllib.parse.urlencode({'query': query})}")["data"]["result"]
    return any(math.isfinite(float(series["value"][1])) for series in result)


@needs_prometheus
def test_every_dashboard_panel_returns_data_from_a_live_mesh(tmp_path):
    config = tmp_path / "prometheus.yml"
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api/v1"
    with running_mesh("pdd-mini", tmp_path / "mesh") as url:
        _prometheus_config(tmp_path / "mesh", config)
        prometheus = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                       f"--web.listen-address=127.0.0.1:{port}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stop = threading.Event()
        load = threading.Thread(target=_traffic, args=(url, stop), daemon=True)
        try:
            load.start()
            pending = dict.fromkeys(panel_queries())
            deadline = time.monotonic() + 150
            while pending and time.monotonic() < deadline:
                try:
                    pending = {q: None for q in pending if not _has_data(api, q[1])}
                except OSError:
                    pass  # prometheus still starting
                time.sleep(1.0)  # one scrape interval between rounds of queries
            assert not pending, f"panels with no data: {sorted(pending)}"
        finally:
            stop.set()
            prometheus.terminate()
            prometheus.wait(timeout=30)
            load.join(timeout=120)
