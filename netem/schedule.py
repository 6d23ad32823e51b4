"""Time-varying links: a timeline of steps, written in YAML or replayed from a CSV trace.

    loop: true           # start over after `period`
    period: 60s
    steps:
      - at: 0s
        both: {delay: 20ms, rate: 2gbit}      # same fields as PATCH /config
      - at: 10s
        partition: {mode: blackhole, direction: up, duration: 2s}
      - at: 15s
        heal: both
      - at: 20s
        reset: true
    trace:               # optional: more steps, one per CSV row
      file: rate.csv     # relative to the YAML file; header "t,<field>[,<field>...]"
      direction: both    # (a posted schedule carries its rows inline: `csv: "t,rate\n0s,1gbit"`)

Parsing validates every step against the config model, so a bad schedule is
refused whole before it starts (docs/netem.md, "Schedules"). A schedule that
comes over the control API is read by `parse_posted`: its content, or the name
of a shipped schedule, never a file of the server's.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from netem.config import ConfigError, LinkConfig
from netem.schedules import example, shipped_names
from netem.units import parse_duration

Sides = Literal["up", "down", "both"]
MAX_SCHEDULE_S = 86400.0  # step offsets, periods and partitions: at most a day


def _seconds(value: Any) -> float:
    return parse_duration(value)


class PartitionStep(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    mode: Literal["blackhole", "reject"]
    direction: Sides = "both"
    duration: float | None = Field(None, ge=0, le=MAX_SCHEDULE_S, description="seconds; None until a heal step")

    @field_validator("duration", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float | None:
        return None if value is None else _seconds(value)


class Step(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    at: float = Field(ge=0, le=MAX_SCHEDULE_S, description="seconds from the start of the cycle")
    up: dict[str, Any] | None = None
    down: dict[str, Any] | None = None
    both: dict[str, Any] | None = None
    partition: PartitionStep | None = None
    heal: Sides | None = None
    reset: bool = False

    @field_validator("at", mode="before")
    @classmethod
    def _at(cls, value: Any) -> float:
        return _seconds(value)

    @model_validator(mode="after")
    def _check_patch(self) -> Step:
        if self.patch:
            LinkConfig().patched(self.patch)  # raises ConfigError naming the bad field
        return self

    @property
    def patch(self) -> dict[str, Any]:
        return {k: v for k, v in (("both", self.both), ("up", self.up), ("down", self.down)) if v}


class Schedule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    steps: list[Step] = Field(default_factory=list)
    loop: bool = False
    period: float | None = Field(None, gt=0, le=MAX_SCHEDULE_S, description="seconds per cycle when looping")

    @field_validator("period", mode="before")
    @classmethod
    def _period(cls, value: Any) -> float | None:
        return None if value is None else _seconds(value)

    @model_validator(mode="after")
    def _check(self) -> Schedule:
        if not self.steps:
            raise ValueError("a schedule needs at least one step")
        ordered = sorted(self.steps, key=lambda s: s.at)  # stable: same-time steps keep file order
        object.__setattr__(self, "steps", ordered)
        if self.loop and (self.period is None or self.period <= ordered[-1].at):
            raise ValueError(f"loop: true needs a period longer than the last step (at {ordered[-1].at:g}s)")
        return self


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without anchors and aliases: a few hundred bytes of aliases can expand to billions of steps."""

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        if self.check_event(yaml.AliasEvent):
            raise ConfigError("a schedule may not use YAML aliases (*name)")
        return super().compose_node(parent, index)


def _load_yaml(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as err:
        raise ConfigError(f"schedule is not valid YAML: {err}") from None
    except RecursionError:
        raise ConfigError("schedule is nested too deeply") from None


def parse_schedule(text: str, base_dir: Path | None = None) -> Schedule:
    """Read a schedule from YAML text; a `trace.file` is looked up relative to base_dir.

    Without base_dir (a schedule that came over the network) a trace must carry its rows inline
    (`trace: {csv: ...}`): nothing on the server's disk is read.
    """
    data = _load_yaml(text)
    if not isinstance(data, dict):
        raise ConfigError("a schedule is a YAML mapping with `steps` and/or `trace`")
    data = dict(data)
    steps = data.get("steps") or []
    if not isinstance(steps, list):
        raise ConfigError("`steps` is a list of steps")
    steps = list(steps)
    trace = data.pop("trace", None)
    if trace is not None:
        steps.extend(_trace(trace, base_dir))
    data["steps"] = steps
    try:
        return Schedule.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_explain(err)) from None
    except RecursionError:
        raise ConfigError("schedule is nested too deeply") from None


def _trace(trace: Any, base_dir: Path | None) -> list[dict[str, Any]]:
    source = "file" if base_dir is not None else "csv"
    if not isinstance(trace, dict) or source not in trace:
        where = "a `file` (a CSV next to the YAML)" if base_dir is not None else "its rows inline as `csv` text"
        raise ConfigError(f"trace needs {where} and optionally a `direction`")
    unknown = set(trace) - {source, "direction"}
    if unknown:
        raise ConfigError(f"unknown trace key(s) {sorted(unknown)}; use {source} and direction")
    text = _read(base_dir / str(trace["file"])) if base_dir is not None else trace["csv"]
    if not isinstance(text, str):
        raise ConfigError("trace csv is the CSV text itself")
    return trace_steps(text, trace.get("direction", "both"))


def parse_posted(text: str) -> Schedule:
    """A schedule sent to the control API: its YAML or JSON content, or {"name": "<shipped schedule>"}."""
    data = _load_yaml(text)
    if isinstance(data, dict) and "path" in data:
        raise ConfigError('the link reads no server files: post the schedule itself, or {"name": ...} of a '
                          f"shipped one ({', '.join(shipped_names())})")
    if isinstance(data, dict) and set(data) == {"name"}:
        name = str(data["name"])
        if name not in shipped_names():
            raise ConfigError(f"no shipped schedule {name!r}; shipped: {', '.join(shipped_names())}")
        return load_schedule(example(name))
    return parse_schedule(text)


def load_schedule(path: str | Path) -> Schedule:
    """A YAML schedule, or a bare CSV trace (played once on both directions)."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        try:
            return Schedule.model_validate({"steps": trace_steps(_read(path), "both")})
        except ValidationError as err:
            raise ConfigError(_explain(err)) from None
    return parse_schedule(_read(path), base_dir=path.parent)


def posted_form(path: str | Path) -> str:
    """What a client POSTs for a schedule file: its content, with a trace's CSV rows inlined."""
    path = Path(path)
    load_schedule(path)  # refuse a bad file here, with its name, before any link sees it
    if path.suffix.lower() == ".csv":
        return json.dumps({"trace": {"csv": _read(path)}})
    data = _load_yaml(_read(path))
    trace = data.get("trace")
    if isinstance(trace, dict) and "file" in trace:
        data["trace"] = {"csv": _read(path.parent / str(trace["file"])),
                         **({"direction": trace["direction"]} if "direction" in trace else {})}
    return json.dumps(data)


def trace_steps(csv_text: str, direction: str = "both") -> list[dict[str, Any]]:
    """Rows of "t,<field>..." as step mappings; each row holds until the next."""
    if direction not in ("up", "down", "both"):
        raise ConfigError(f"trace direction {direction!r}: use up, down or both")
    rows = [r for r in csv.reader(io.StringIO(csv_text)) if r and not r[0].lstrip().startswith("#")]
    if not rows or rows[0][0].strip() != "t" or len(rows[0]) < 2:
        raise ConfigError('a trace CSV starts with a header "t,<field>[,<field>...]", e.g. "t,rate"')
    fields = [name.strip() for name in rows[0][1:]]
    steps = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(fields) + 1:
            raise ConfigError(f"trace line {number}: expected {len(fields) + 1} values, got {len(row)}")
        values = {f: v.strip() for f, v in zip(fields, row[1:]) if v.strip()}
        steps.append({"at": row[0].strip(), direction: values})
    if not steps:
        raise ConfigError("the trace CSV has a header but no rows")
    return steps


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}") from None


def _explain(err: ValidationError) -> str:
    parts = []
    for item in err.errors():
        where = ".".join(str(p) for p in item["loc"]) or "schedule"
        parts.append(f"{where}: {item['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)
