"""Workload SPEC strings: `agentic[:k=v,...]`, `mooncake:FILE[:k=v,...]`, `poisson[:k=v,...]`, `gamma[:k=v,...]`.

Keys are the config fields (dashes or underscores); values take units
("64K" tokens, "500ms", "100..400" lengths). Errors name the key and the choices.
"""

from __future__ import annotations

from pydantic import BaseModel, ValidationError

from loadgen.workloads import AgenticConfig, MooncakeConfig, SyntheticConfig, WorkloadConfig

SPEC_KINDS: dict[str, type[BaseModel]] = {
    "agentic": AgenticConfig,
    "mooncake": MooncakeConfig,
    "poisson": SyntheticConfig,
    "gamma": SyntheticConfig,
}
SPEC_USAGE = "agentic[:key=value,...], mooncake:FILE[:key=value,...], poisson[:key=value,...] or gamma[:key=value,...]"


class SpecError(ValueError):
    """A workload spec a person can fix; the message says what and how."""


def parse_options(text: str, kind: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SpecError(f"workload {kind}: {item!r} is not key=value")
        key = key.strip().replace("-", "_")
        if key in options:
            raise SpecError(f"workload {kind}: key {key!r} given twice")
        options[key] = value.strip()
    return options


def _split_mooncake(rest: str) -> tuple[str, str]:
    # the options follow the last ':' only if that tail is key=value pairs; a path may hold ':'
    path, sep, tail = rest.rpartition(":")
    if sep and "=" in tail:
        return path, tail
    return rest, ""


def parse_spec(text: str) -> WorkloadConfig:
    """Parse a workload SPEC into its validated config."""
    head, _, rest = text.strip().partition(":")
    kind = head.strip().lower()
    if kind not in SPEC_KINDS:
        raise SpecError(f"unknown workload {head!r}; use {SPEC_USAGE}")
    model = SPEC_KINDS[kind]
    if kind == "mooncake":
        path, option_text = _split_mooncake(rest)
        if not path.strip():
            raise SpecError("workload mooncake needs a trace file: mooncake:FILE[:key=value,...]")
        fields: dict[str, object] = {"file": path.strip(), **parse_options(option_text, kind)}
    else:
        fields = dict(parse_options(rest, kind))
        if model is SyntheticConfig:
            fields["kind"] = kind
    valid = sorted(name for name in model.model_fields if name != "kind")
    unknown = sorted(set(fields) - set(model.model_fields) - {"kind"})
    if unknown:
        raise SpecError(f"workload {kind}: unknown key {unknown[0]!r}; valid keys: {', '.join(valid)}")
    try:
        return model.model_validate(fields)  # type: ignore[return-value]
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'spec'}: {e['msg'].removeprefix('Value error, ')}"
            for e in error.errors()
        )
        raise SpecError(f"workload {kind}: {problems}") from None


def spec_string(config: WorkloadConfig) -> str:
    """The SPEC that parses back to `config`: its kind and the fields that differ from the defaults."""
    required = {"file": config.file} if isinstance(config, MooncakeConfig) else {"kind": config.kind}
    defaults = type(config).model_validate(required)
    options = []
    for name in type(config).model_fields:
        value = getattr(config, name)
        if name in ("kind", "file") or value == getattr(defaults, name):
            continue
        if name == "hits":
            text = "natural" if value is None else "/".join(f"{w:.12g}" for w in value)
        else:
            text = f"{value:g}" if isinstance(value, float) else str(value)
        options.append(f"{name}={text}")
    head = f"mooncake:{config.file}" if isinstance(config, MooncakeConfig) else config.kind
    return f"{head}:{','.join(options)}" if options else head
