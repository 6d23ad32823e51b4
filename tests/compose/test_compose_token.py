"""The links' control token: compose has no default for it, and `make up` makes a random one."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

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
