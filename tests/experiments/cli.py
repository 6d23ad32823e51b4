"""Run `pdd-emu experiment NAME --quick --json` as a user would and return its headline figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

QUICK_LIMIT_S = 600  # every quick variant must finish within ten minutes on two cores


def quick_headline(name: str, out: Path, *extra: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "services.cli", "experiment", name, "--quick", "--json",
                           "--out", str(out), *extra], capture_output=True, text=True, timeout=QUICK_LIMIT_S)
    assert proc.returncode == 0, f"experiment {name} failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])
