"""GPU profiles: datasheet fields, constants with provenance, price overrides, rewriting constants."""

from __future__ import annotations

import shutil

import pytest
import yaml

from services.profiles import (
    GPUS_YAML, UnknownProfileError, gpu_names, load_gpu, price_env_var, write_gpu_constants,
)
from services.profiles.gpu import Constant
from services.types import LaunchStyle

REQUIRED = {"h100-sxm", "h200-sxm", "h20", "a100-80g", "l40s"}


def test_the_required_gpus_are_shipped():
    assert REQUIRED <= set(gpu_names())


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_gpu_exposes_what_the_mesh_needs(name):
    gpu = load_gpu(name)
    assert gpu.name == name
    assert gpu.hbm_bytes > 40 * 2**30
    assert gpu.hbm_bandwidth_Bps > 0.5e12 and gpu.interconnect_bandwidth_Bps > 0 and gpu.nic_bandwidth_bps >= 1e11
    assert gpu.price_per_hour > 0 and gpu.price_source
    assert gpu.dense_bf16_flops > 1e14
    assert gpu.calibration


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_every_constant_says_where_it_came_from(name):
    gpu = load_gpu(name)
    constants = [c for _, c in gpu.efficiency] + [c for costs in gpu.launch.values() for _, c in costs]
    constants.append(gpu.allreduce_latency_s)
    assert all(isinstance(c, Constant) and c.source for c in constants)
    assert set(gpu.launch) == set(LaunchStyle)


def test_h200_constants_are_fitted_and_the_others_borrow_them():
    h200, h100 = load_gpu("h200-sxm"), load_gpu("h100-sxm")
    assert h200.efficiency.gemm_compute_fraction.source.startswith("fit:")
    assert h100.efficiency.gemm_compute_fraction.value == h200.efficiency.gemm_compute_fraction.value
    assert h100.efficiency.gemm_compute_fraction.source.startswith("h200-sxm:")
    assert "derived" in h100.calibration


def test_datasheet_peaks_order_the_cards_as_expected():
    h200, h100, h20 = load_gpu("h200-sxm"), load_gpu("h100-sxm"), load_gpu("h20")
    assert h200.dense_bf16_flops == h100.dense_bf16_flops > 5 * h20.dense_bf16_flops
    assert h200.hbm_bandwidth_Bps > h20.hbm_bandwidth_Bps > h100.hbm_bandwidth_Bps
    assert load_gpu("a100-80g").dense_fp8_flops is None
    assert load_gpu("a100-80g").peak_flops("fp8") == load_gpu("a100-80g").dense_bf16_flops


def test_h200_costs_20_to_30_percent_more_than_h100():
    ratio = load_gpu("h200-sxm").price_per_hour / load_gpu("h100-sxm").price_per_hour
    assert 1.2 <= ratio <= 1.3


def test_price_comes_from_argument_then_environment_then_yaml(monkeypatch):
    default = load_gpu("h20").price_per_hour
    monkeypatch.setenv(price_env_var("h20"), "7.5")
    assert price_env_var("h20") == "PDD_EMU_GPU_PRICE_H20"
    assert load_gpu("h20").price_per_hour == 7.5
    assert load_gpu("h20", price_per_hour=1.25).price_per_hour == 1.25
    monkeypatch.delenv(price_env_var("h20"))
    assert load_gpu("h20").price_per_hour == default


def test_a_bad_price_is_refused(monkeypatch):
    monkeypatch.setenv(price_env_var("l40s"), "cheap")
    with pytest.raises(ValueError, match="PDD_EMU_GPU_PRICE_L40S"):
        load_gpu("l40s")
    with pytest.raises(ValueError, match=">= 0"):
        load_gpu("h20", price_per_hour=-1)


def test_unknown_gpu_names_every_valid_one():
    with pytest.raises(UnknownProfileError) as caught:
        load_gpu("b200")
    for name in gpu_names():
        assert name in str(caught.value)


def test_writing_constants_replaces_one_entry_and_keeps_the_header(tmp_path):
    target = tmp_path / "gpus.yaml"
    shutil.copyfile(GPUS_YAML, target)
    h200 = load_gpu("h200-sxm")
    faster = h200.efficiency.model_copy(update={"gemm_compute_fraction": Constant(value=0.5, source="test")})
    write_gpu_constants("h20", faster, h200.launch, target, calibration="fitted in a test")
    written = yaml.safe_load(target.read_text())
    assert written["h20"]["efficiency"]["gemm_compute_fraction"] == {"value": 0.5, "source": "test"}
    assert written["h20"]["calibration"] == "fitted in a test"
    assert "constants_from" not in written["h20"]
    assert written["h100-sxm"] == yaml.safe_load(GPUS_YAML.read_text())["h100-sxm"]
    assert target.read_text().startswith("#")
    assert load_gpu("h20").efficiency.gemm_compute_fraction.value != 0.5, "the package file is untouched"
