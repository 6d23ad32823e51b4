"""GPU and model profiles: YAML package data validated into frozen pydantic models.

    load_gpu("h200-sxm").hbm_bandwidth_Bps      load_model("llama3-8b").kv_bytes_per_token

A GPU entry either carries its own fitted constants or names the GPU whose
constants (fractions of peak, launch costs) it borrows with `constants_from`.
A GPU's price per hour comes, highest first, from the `price_per_hour`
argument (a scenario field), the environment variable
PDD_EMU_GPU_PRICE_<NAME> (e.g. PDD_EMU_GPU_PRICE_H200_SXM=4.1), then the YAML
default (docs/roofline.md §Profiles).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from services.profiles.gpu import Constant, Efficiency, GpuProfile, LaunchCosts
from services.profiles.model import ModelProfile

__all__ = [
    "Constant", "Efficiency", "GpuProfile", "LaunchCosts", "ModelProfile", "UnknownProfileError",
    "gpu_names", "load_gpu", "load_model", "model_names", "price_env_var", "write_gpu_constants",
]

GPUS_YAML = Path(__file__).with_name("gpus.yaml")
MODELS_YAML = Path(__file__).with_name("models.yaml")
MEASUREMENTS_DIR = Path(__file__).with_name("measurements")
SHIPPED_H200_MEASUREMENTS = MEASUREMENTS_DIR / "h200-llama3-8b-layers.json"


class UnknownProfileError(ValueError):
    """A profile name that is not in the YAML; the message lists the valid names."""


@functools.cache
def _entries(path: Path) -> dict[str, dict[str, Any]]:
    with path.open() as file:
        return yaml.safe_load(file)


def gpu_names() -> list[str]:
    return sorted(_entries(GPUS_YAML))


def model_names() -> list[str]:
    return sorted(_entries(MODELS_YAML))


def _entry(path: Path, kind: str, name: str) -> dict[str, Any]:
    entries = _entries(path)
    if name not in entries:
        raise UnknownProfileError(f"unknown {kind} {name!r}; choose one of {', '.join(sorted(entries))}")
    return entries[name]


def price_env_var(gpu_name: str) -> str:
    return "PDD_EMU_GPU_PRICE_" + gpu_name.upper().replace("-", "_").replace(".", "_")


@functools.cache
def _gpu_from_yaml(name: str) -> GpuProfile:
    entry = dict(_entry(GPUS_YAML, "GPU", name))
    donor_name = entry.pop("constants_from", None)
    if donor_name is not None:
        donor = _gpu_from_yaml(donor_name)
        borrowed = {
            key: Constant(value=c.value, source=f"{donor_name}: {c.source}")
            for key, c in donor.efficiency if c is not None
        }
        entry["efficiency"] = Efficiency(**borrowed)
        entry["launch"] = {
            style: LaunchCosts(**{key: Constant(value=c.value, source=f"{donor_name}: {c.source}") for key, c in costs})
            for style, costs in donor.launch.items()
        }
    try:
        return GpuProfile(name=name, **entry)
    except ValidationError as exc:
        raise ValueError(f"GPU profile {name!r} in {GPUS_YAML.name} is invalid: {exc}") from exc


def load_gpu(name: str, price_per_hour: float | None = None) -> GpuProfile:
    gpu = _gpu_from_yaml(name)
    if price_per_hour is None and (from_env := os.environ.get(price_env_var(name))):
        try:
            price_per_hour = float(from_env)
        except ValueError:
            raise ValueError(f"{price_env_var(name)}={from_env!r} is not a price per GPU-hour") from None
    if price_per_hour is None:
        return gpu
    if price_per_hour < 0:
        raise ValueError(f"price per GPU-hour for {name} must be >= 0, not {price_per_hour}")
    return gpu.model_copy(update={"price_per_hour": price_per_hour, "price_source": "override"})


@functools.cache
def load_model(name: str) -> ModelProfile:
    try:
        return ModelProfile(name=name, **_entry(MODELS_YAML, "model", name))
    except ValidationError as exc:
        raise ValueError(f"model profile {name!r} in {MODELS_YAML.name} is invalid: {exc}") from exc


class _ProfileDumper(yaml.SafeDumper):
    """Writes floats as 9.894e+14 rather than 989400000000000.0, still read back as floats."""


def _represent_float(dumper: yaml.SafeDumper, value: float) -> yaml.Node:
    text = format(value, ".6g")
    if "." not in text and "inf" not in text and "nan" not in text:
        text = text.replace("e", ".0e") if "e" in text else text + ".0"
    return dumper.represent_scalar("tag:yaml.org,2002:float", text)


_ProfileDumper.add_representer(float, _represent_float)


def write_gpu_constants(
    name: str, efficiency: Efficiency, launch: dict, path: Path = GPUS_YAML, calibration: str | None = None
) -> None:
    """Replace one GPU's fitted constants (and its calibration note) in a profile YAML, keeping the header comment."""
    text = path.read_text()
    entries = yaml.safe_load(text)
    if name not in entries:
        raise UnknownProfileError(f"unknown GPU {name!r} in {path}; choose one of {', '.join(sorted(entries))}")
    entry = entries[name]
    entry.pop("constants_from", None)
    entry["efficiency"] = efficiency.model_dump()
    entry["launch"] = {getattr(style, "value", style): costs.model_dump() for style, costs in launch.items()}
    if calibration is not None:
        entry["calibration"] = calibration
    dumped = yaml.dump(entries, Dumper=_ProfileDumper, sort_keys=False, width=120, allow_unicode=True)
    path.write_text(_leading_comment(text) + dumped)
    if path == GPUS_YAML:
        _entries.cache_clear()
        _gpu_from_yaml.cache_clear()


def _leading_comment(text: str) -> str:
    lines: list[str] = []
    for line in text.splitlines(keepends=True):
        if not (line.startswith("#") or not line.strip()):
            break
        lines.append(line)
    return "".join(lines)
