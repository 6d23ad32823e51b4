"""Load a scenario from a shipped preset or a YAML file, with dotted overrides.

Overrides are `key=value` strings (`wan.rate_bps=5gbit`, `seed=3`,
`pools.decode.count=4` addresses a pool by name); values are parsed as YAML
scalars so numbers stay numbers and unit strings stay strings.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Iterable

import yaml
from pydantic import ValidationError

from services.scenario.model import Scenario

_PRESETS = resources.files("services.scenario") / "presets"


class ScenarioError(ValueError):
    """A scenario a person must fix; the message says where and how."""


def preset_names() -> list[str]:
    return sorted(p.name[: -len(".yaml")] for p in _PRESETS.iterdir() if p.name.endswith(".yaml"))


def _read(name_or_path: str) -> dict[str, Any]:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise ScenarioError(f"scenario file {name_or_path!r} does not exist")
        text = path.read_text()
    elif name_or_path in preset_names():
        text = (_PRESETS / f"{name_or_path}.yaml").read_text()
    else:
        raise ScenarioError(f"unknown scenario {name_or_path!r}: give a YAML file or one of {', '.join(preset_names())}")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"scenario {name_or_path!r} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ScenarioError(f"scenario {name_or_path!r} must be a YAML mapping, got {type(data).__name__}")
    return data


def apply_override(data: dict[str, Any], override: str) -> None:
    key, sep, raw = override.partition("=")
    if not sep or not key:
        raise ScenarioError(f"override {override!r} is not of the form key=value")
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError as exc:
        problem = str(exc).splitlines()[0]
        raise ScenarioError(f"override {override!r}: the value is not a YAML scalar ({problem})") from exc
    parts = key.split(".")
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        # `pools.NAME.field` addresses the pool by name rather than by list index.
        if part == "pools" and isinstance(node.get("pools"), list):
            pools = node["pools"]
            match = [p for p in pools if isinstance(p, dict) and p.get("name") == parts[i + 1]]
            if not match:
                raise ScenarioError(f"override {override!r}: no pool named {parts[i + 1]!r}")
            match[0][parts[-1]] = value
            return
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ScenarioError(f"override {override!r}: {part!r} is not a section")
    node[parts[-1]] = value


def load_scenario(name_or_path: str, overrides: Iterable[str] = ()) -> Scenario:
    data = _read(name_or_path)
    for override in overrides:
        apply_override(data, override)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'scenario'}: {e['msg']}" for e in exc.errors())
        raise ScenarioError(f"scenario {name_or_path!r} is invalid: {problems}") from exc
    _check_profiles(scenario)
    return scenario


def _check_profiles(scenario: Scenario) -> None:
    from services.profiles import gpu_names, model_names
    from services.scenario.sizing import instance_sizing

    if scenario.model not in model_names():
        raise ScenarioError(f"unknown model {scenario.model!r}; choose one of {', '.join(model_names())}")
    for pool in scenario.pools:
        if pool.gpu not in gpu_names():
            raise ScenarioError(f"pool {pool.name}: unknown GPU {pool.gpu!r}; choose one of {', '.join(gpu_names())}")
        try:  # the layout must suit the model, and the weights must leave room for KV
            instance_sizing(scenario, pool)
        except ValueError as exc:
            raise ScenarioError(f"pool {pool.name}: {exc}") from None
