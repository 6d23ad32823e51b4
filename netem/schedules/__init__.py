"""Example schedules shipped with the package (YAML timelines and CSV traces)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def example(name: str) -> Path:
    """Path of a shipped schedule, e.g. example("kv_wander.yaml")."""
    return Path(str(resources.files(__name__) / name))


def shipped_names() -> list[str]:
    """File names of the shipped schedules (YAML timelines and CSV traces), the only ones the control API plays."""
    return sorted(entry.name for entry in resources.files(__name__).iterdir()
                  if entry.name.endswith((".yaml", ".csv")))
