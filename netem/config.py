"""What a link does to its bytes: one frozen parameter object per direction.

Values arrive as unit strings ("20ms", "800mbit", "64MiB", "0.1%") or plain
numbers and are held in base units: seconds, bits per second, bytes, fractions.
A direction is `up` (accepted client -> upstream) or `down` (upstream -> client);
`both` in a patch sets the two alike. The formulas each field feeds are in
docs/netem.md.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from netem.units import parse_duration, parse_fraction, parse_rate, parse_size

Direction = Literal["up", "down"]
DIRECTIONS: tuple[Direction, Direction] = ("up", "down")
JitterDist = Literal["uniform", "normal", "pareto", "paretonormal"]

MSS_BYTES = 1448  # the payload of one 1500-byte Ethernet frame with TCP timestamps
# Bounds on every numeric field (docs/netem.md, "Control API"): far past any line this emulates,
# yet short enough that a mistyped value cannot hold a link's bytes for hours.
MAX_DELAY_S = 600.0  # delay and jitter; the round trip may be twice this
MAX_RATE_BPS = 10e12  # 10 Tbit/s
MAX_BYTES = 2**40  # queue and windows: 1 TiB
MAX_LOSS_UNIT_BYTES = 64 * 2**20
MAX_LOSS_STALL_S = 60.0


class DirectionConfig(BaseModel):
    """The impairments of one direction. Every field has a working default: no shaping."""

    # Attributes carry their units (delay_s, rate_bps, queue_bytes, ...); the control API, schedules
    # and the CLI speak the short names (delay, rate, queue), the aliases, and get them back.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, populate_by_name=True)

    delay_s: float = Field(0.0, ge=0, le=MAX_DELAY_S, description="one-way propagation delay, seconds", alias="delay")
    jitter_s: float = Field(0.0, ge=0, le=MAX_DELAY_S, description="jitter scale (sigma), seconds", alias="jitter")
    jitter_dist: JitterDist = Field("uniform", description="jitter distribution, as tc netem names them")
    correlation: float = Field(0.0, ge=0, le=1, description="weight of the previous jitter draw (netem's rho)")
    rate_bps: float | None = Field(None, gt=0, le=MAX_RATE_BPS, alias="rate",
        description="line rate, bits per second; None is unlimited")
    queue_bytes: int = Field(64 * 2**20, gt=0, le=MAX_BYTES, alias="queue",
        description="bytes the direction may hold before it stops reading")
    loss: float = Field(0.0, ge=0, le=1, description="probability that one loss unit is lost")
    loss_unit_bytes: int = Field(MSS_BYTES, gt=0, le=MAX_LOSS_UNIT_BYTES, alias="loss_unit",
        description="bytes per loss unit (one segment-equivalent)")
    loss_stall_s: float = Field(0.2, ge=0, le=MAX_LOSS_STALL_S, alias="loss_stall",
        description="stall per lost unit, seconds (Linux's minimum RTO)")
    window_bytes: int | None = Field(None, gt=0, le=MAX_BYTES, alias="window",
        description="cap on bytes in flight per connection; None: no cap")
    slow_start: bool = Field(False, description="restart from initial_window after an idle RTO")
    initial_window_bytes: int = Field(10 * MSS_BYTES, gt=0, le=MAX_BYTES, alias="initial_window",
        description="slow-start initial window, bytes")
    rtt_s: float | None = Field(None, gt=0, le=2 * MAX_DELAY_S, alias="rtt",
        description="round trip for the window model; None: up + down delay")

    @field_validator("delay_s", "jitter_s", "loss_stall_s", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float:
        return parse_duration(value)

    @field_validator("rtt_s", mode="before")
    @classmethod
    def _optional_duration(cls, value: Any) -> float | None:
        return None if value is None else parse_duration(value)

    @field_validator("rate_bps", mode="before")
    @classmethod
    def _rate(cls, value: Any) -> float | None:
        if value is None or value in ("", "none", "unlimited"):
            return None
        return parse_rate(value)

    @field_validator("queue_bytes", "loss_unit_bytes", "initial_window_bytes", mode="before")
    @classmethod
    def _size(cls, value: Any) -> int:
        return parse_size(value)

    @field_validator("window_bytes", mode="before")
    @classmethod
    def _optional_size(cls, value: Any) -> int | None:
        return None if value in (None, "", "none") else parse_size(value)

    @field_validator("correlation", "loss", mode="before")
    @classmethod
    def _fraction(cls, value: Any) -> float:
        return parse_fraction(value)

    @field_validator("jitter_dist", mode="before")
    @classmethod
    def _dist(cls, value: Any) -> Any:
        return value.replace("-", "").replace("_", "").lower() if isinstance(value, str) else value

    def updated(self, changes: Mapping[str, Any]) -> DirectionConfig:
        """A copy with `changes` applied and validated; raises ConfigError."""
        merged = self.model_dump(by_alias=True)
        merged.update({_API_NAMES.get(key, key): value for key, value in changes.items()})
        return _validated(DirectionConfig, merged)


class LinkConfig(BaseModel):
    """Both directions of one link."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    up: DirectionConfig = Field(default_factory=DirectionConfig, description="client -> upstream")
    down: DirectionConfig = Field(default_factory=DirectionConfig, description="upstream -> client")

    @classmethod
    def symmetric(cls, **fields: Any) -> LinkConfig:
        """The same impairments in both directions, e.g. LinkConfig.symmetric(delay="20ms")."""
        one = _validated(DirectionConfig, fields)
        return cls(up=one, down=one)

    def patched(self, patch: Mapping[str, Any]) -> LinkConfig:
        """Apply a patch {"up": {...}, "down": {...}, "both": {...}}; `both` first, then each side."""
        if not isinstance(patch, Mapping):
            raise ConfigError("a config patch is an object with keys up, down or both")
        unknown = set(patch) - {"up", "down", "both"}
        if unknown:
            raise ConfigError(f"unknown key(s) {sorted(unknown)} in config patch; use up, down or both")
        sides = {}
        for side in DIRECTIONS:
            changes: dict[str, Any] = {}
            for key in ("both", side):
                part = patch.get(key) or {}
                if not isinstance(part, Mapping):
                    raise ConfigError(f"{key!r} must be an object of fields, got {part!r}")
                changes.update(part)
            sides[side] = getattr(self, side).updated(changes)
        return LinkConfig(**sides)

    def rtt(self, side: Direction) -> float:
        """Round trip used by the window model of one direction: explicit, else up + down delay."""
        explicit = getattr(self, side).rtt_s
        return explicit if explicit is not None else self.up.delay_s + self.down.delay_s


# A field's attribute name -> its name in the API (the alias, where it has one).
_API_NAMES = {name: field.alias or name for name, field in DirectionConfig.model_fields.items()}


class ConfigError(ValueError):
    """A config or patch a person can fix; the message names the field and the problem."""


def _validated(model: type[BaseModel], data: Mapping[str, Any]) -> Any:
    try:
        return model.model_validate(dict(data))
    except ValidationError as err:
        raise ConfigError(_explain(err)) from None


def _explain(err: ValidationError) -> str:
    parts = []
    for item in err.errors():
        where = ".".join(str(p) for p in item["loc"]) or "config"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = f"unknown field; known fields: {', '.join(_API_NAMES.values())}"
        parts.append(f"{where}: {message}")
    return "; ".join(parts)
