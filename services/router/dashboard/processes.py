"""The mesh's processes as their keepers see them: restarts, state and last exit code (services/launcher/keeper.py).

Each keeper replaces NAME.json in the plan's `status_dir` atomically whenever its process starts, exits
or backs off; `pdd-emu status` and the chaos tool read the same files. A restart count that grows, or a
keeper that gives up, becomes one event line. A plan without `status_dir` (compose, where the engine
restarts containers) has no keepers to read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from services.scenario.plan import MeshPlan


class KeeperWatch:
    def __init__(self, plan: MeshPlan) -> None:
        self.folder = Path(plan.status_dir) if plan.status_dir else None
        self.names = [service.name for service in plan.services] + [link.name for link in plan.links]
        self._seen: dict[str, dict] = {}

    def poll(self) -> tuple[list[dict[str, Any]], list[str]]:
        """Each process's restarts and state (None where no keeper has written yet), and what changed."""
        if self.folder is None:
            return [], []
        rows, events = [], []
        for name in self.names:
            status = self._read(name)
            before = self._seen.get(name)
            if status is not None and before is not None:
                if status["restarts"] > before["restarts"]:
                    events.append(f"{name} {_ended(status['last_exit_code'])}; its keeper restarted it "
                                  f"(restart {status['restarts']})")
                if status["state"] == "gave-up" != before["state"]:
                    events.append(f"{name} {_ended(status['last_exit_code'])}; its keeper gave up after "
                                  f"{status['restarts']} restarts")
            if status is not None:
                self._seen[name] = status
            rows.append({"name": name, "restarts": status["restarts"] if status else None,
                         "state": status["state"] if status else None,
                         "last_exit_code": status["last_exit_code"] if status else None})
        return rows, events

    def _read(self, name: str) -> dict | None:
        # A few hundred bytes from the page cache, a few microseconds: read on the loop, not in a thread.
        try:
            return json.loads((self.folder / f"{name}.json").read_text())
        except (OSError, ValueError):
            return None  # not written yet, or (rarely) read while the keeper replaced it


def _ended(code: int | None) -> str:
    """How a process ended, as the keeper records it: a negative code is the signal that killed it."""
    return f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with status {code}"
