"""compose.yaml without an engine: no default control token (`make up` makes a random one), restart policies,
and the project name, port and image tag taken from the environment."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_compose_refuses_to_start_without_a_token():
    compose = yaml.safe_load((ROOT / "compose" / "compose.yaml").read_text())
    value = compose["x-pdd-emu"]["environment"]["PDD_EMU_LINK_TOKEN"]
    assert value.startswith("${PDD_EMU_LINK_TOKEN:?"), value  # `:?` fails interpolation when unset


def _make_env(workdir: Path) -> str:
    (workdir / "compose").mkdir(parents=True)
    subprocess.run(["make", "-s", "-C", str(workdir), "-f", str(ROOT / "Makefile"), "compose/.env"], check=True,
                   capture_output=True, timeout=30)
    env = workdir / "compose" / ".env"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    (line,) = env.read_text().splitlines()
    key, token = line.split("=", 1)
    assert key == "PDD_EMU_LINK_TOKEN" and len(token) == 48 and int(token, 16) >= 0
    return token


def test_make_up_writes_a_fresh_random_token_once(tmp_path):
    first, second = _make_env(tmp_path / "a"), _make_env(tmp_path / "b")
    assert first != second
    again = subprocess.run(["make", "-s", "-C", str(tmp_path / "a"), "-f", str(ROOT / "Makefile"), "compose/.env"],
                           capture_output=True, text=True, timeout=30)
    assert (tmp_path / "a" / "compose" / ".env").read_text().strip().endswith(first)  # kept, not replaced
    assert again.returncode == 0


def test_services_restart_on_failure_and_one_shot_tools_do_not():
    services = yaml.safe_load((ROOT / "compose" / "compose.yaml").read_text())["services"]
    one_shots = {"plan", "locust", "chaos", "wan-netem"}
    for name, service in services.items():
        assert service["restart"] == ("no" if name in one_shots else "on-failure:5"), name


def _compose_config(env: dict[str, str]) -> dict | None:
    """`docker compose config` as JSON (the CLI alone, no engine); None where the Compose CLI is missing."""
    if shutil.which("docker") is None:
        return None
    done = subprocess.run(["docker", "compose", "-f", str(ROOT / "compose" / "compose.yaml"), "config", "--format",
                           "json"], env={**os.environ, "PDD_EMU_LINK_TOKEN": "t", **env}, capture_output=True,
                          text=True, timeout=60)
    return json.loads(done.stdout) if done.returncode == 0 else None


def test_the_project_name_port_and_image_come_from_the_environment():
    default = _compose_config({"COMPOSE_PROJECT_NAME": ""})
    if default is None:
        pytest.skip("needs the Docker Compose CLI (`docker compose config` reads the file, no engine)")
    assert default["name"] == "pdd-emu"
    config = _compose_config({"COMPOSE_PROJECT_NAME": "pdd-b", "PDD_EMU_PORT": "8100", "PDD_EMU_IMAGE": "pdd-emu:b"})
    assert config["name"] == "pdd-b"
    (published,) = config["services"]["router"]["ports"]
    assert str(published["published"]) == "8100" and published["target"] == 8000
    assert {service["image"] for name, service in config["services"].items() if "build" in service or
            name in ("router", "prefill")} == {"pdd-emu:b"}
