"""The import contracts of pyproject.toml ([tool.importlinter], docs/mesh.md "Layers").

The tree as it is keeps every contract. Each contract is then checked against a copy of the tree with
one forbidden import planted in it, and must break there: a contract that matched no module, or that
import-linter read differently from what its name says, would pass vacuously and fail this test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("services", "netem", "loadgen")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
DEADLINE_S = 120.0
CONTRACTS = {c["id"]: c["name"] for c in
             tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]}

# contract id -> (module file, a forbidden import planted at its end)
PLANTS = {
    "netem-alone": ("netem/units.py", "import services.types"),
    "mesh-below-tools": ("services/scenario/plan.py", "import services.launcher.plan"),
    "loadgen-outside-mesh": ("loadgen/lengths.py", "import services.router.server"),
    "layers": ("services/profiles/gpu.py", "import services.router.pipelines"),
    "acyclic": ("services/relay_decode/relay.py", "import services.main_decode.server"),
    "role-cores": ("services/main_decode/role.py", "from services.rpc import channel"),
    "router-core": ("services/router/degraded.py", "from services.router.api import parse_body"),
}
# More ways for a core to reach I/O, each of which must break its contract: directly, or through a
# module that does I/O (the process's gRPC server and ops endpoints, the KV shipper's stubs and sockets,
# the router's Peers adapter, its token feed, its HTTP server).
CORE_PLANTS = [
    ("role-cores", "services/main_decode/handoff.py", "import grpc"),
    ("role-cores", "services/relay_decode/role.py", "import aiohttp"),
    ("role-cores", "services/main_decode/stream.py", "import socket"),
    ("role-cores", "services/prefill/role.py", "from services.instances import RoleProcess"),
    ("role-cores", "services/relay_decode/relay.py", "from services.kv.shipper import KvShipper"),
    ("router-core", "services/router/pdd.py", "import grpc"),
    ("router-core", "services/router/pipelines.py", "from services.router.peers import Peers"),
    ("router-core", "services/router/prefill_target.py", "from services.rpc import metadata"),
    ("router-core", "services/router/main_stream.py", "from services.router.feed import TokenFeed"),
    ("router-core", "services/router/policy.py", "from services.router.server import Router"),
]


def lint(tree: Path, *contracts: str) -> subprocess.CompletedProcess:
    """lint-imports on `tree` (its own copy of the packages first on the path), without a cache."""
    args = [str(LINT_IMPORTS), str(tree / "pyproject.toml"), "--no-cache"]
    for contract in contracts:
        args += ["--contract", contract]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(args, cwd=tree, env=env, capture_output=True, text=True, timeout=DEADLINE_S)


def copy_tree(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, dest / package, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def test_the_tree_keeps_every_contract():
    assert set(CONTRACTS) == set(PLANTS)  # a contract without a planted import could pass vacuously
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(PLANTS)} kept, 0 broken." in result.stdout


@pytest.mark.parametrize("contract", sorted(PLANTS))
def test_a_planted_import_breaks_the_contract(contract, tmp_path):
    tree = copy_tree(tmp_path)
    assert lint(tree, contract).returncode == 0  # the copy, before the plant, keeps it
    module, planted = PLANTS[contract]
    with open(tree / module, "a") as source:
        source.write(f"\n{planted}  # planted: a forbidden import\n")
    result = lint(tree, contract)
    assert result.returncode != 0, result.stdout
    assert f"{CONTRACTS[contract]} BROKEN" in result.stdout, result.stdout


@pytest.mark.parametrize("contract,module,planted", CORE_PLANTS)
def test_a_core_reaching_io_breaks_its_core_contract(contract, module, planted, tmp_path):
    tree = copy_tree(tmp_path)
    with open(tree / module, "a") as source:
        source.write(f"\n{planted}  # planted: a core reaching I/O\n")
    result = lint(tree, contract)
    assert result.returncode != 0, result.stdout
    assert f"{CONTRACTS[contract]} BROKEN" in result.stdout, result.stdout
