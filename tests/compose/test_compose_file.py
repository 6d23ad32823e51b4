"""compose.yaml without Docker: no variable to set, tokens made inside the stack and mounted only where used,
restart policies, and the project name, port and image tag taken from the environment."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose" / "compose.yaml"
LINK_TOKEN_USERS = {"tokens", "wan-link", "rdma-link", "chaos", "wan-netem"}


def _services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def _mounts(service: dict) -> set[str]:
    return {volume.split(":", 1)[0] for volume in service.get("volumes", [])}


def test_compose_needs_no_variable_set():
    required = re.findall(r"\$\{(\w+):?\?", COMPOSE.read_text())  # `${X:?msg}` or `${X?msg}` refuse when unset
    assert required == []


def test_the_tokens_are_made_inside_the_stack_and_each_is_mounted_only_where_it_is_used():
    services = _services()
    assert services["tokens"]["command"][:3] == ["pdd-emu", "compose", "tokens"]
    assert services["tokens"]["network_mode"] == "none"
    assert {name for name, service in services.items() if "link-token" in _mounts(service)} == LINK_TOKEN_USERS
    for name, service in services.items():
        command = service.get("command", [])
        if "serve" in command and "link" not in command[command.index("--service") + 1]:
            assert "mesh-token" in _mounts(service), name  # every role: its gRPC calls carry the token
            assert service["depends_on"]["tokens"] == {"condition": "service_completed_successfully"}, name
        elif name != "tokens":
            assert "mesh-token" not in _mounts(service), name


def test_services_restart_on_failure_and_one_shot_tools_do_not():
    one_shots = {"plan", "tokens", "locust", "chaos", "wan-netem"}
    for name, service in _services().items():
        assert service["restart"] == ("no" if name in one_shots else "on-failure:5"), name


def _compose_config(env: dict[str, str]) -> dict | None:
    """`docker compose config` as JSON (the CLI alone, no engine); None where the Compose CLI is missing."""
    if shutil.which("docker") is None:
        return None
    done = subprocess.run(["docker", "compose", "-f", str(COMPOSE), "config", "--format", "json"],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
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
