"""Calibration: refitting the shipped H200 file reproduces the shipped constants and their accuracy."""

from __future__ import annotations

import pytest

from services.engine.roofline_fit import calibrate, held_out_eager_mape
from services.profiles import SHIPPED_H200_MEASUREMENTS, load_gpu
from services.profiles.measurement import read_measurements
from tests.tolerance import assert_at_most, assert_close

LAYER_GROUPS = ("layer_prefill_eager", "layer_decode_eager", "layer_decode_cuda_graph", "layer_extend")


@pytest.fixture(scope="module")
def measurements():
    return read_measurements(SHIPPED_H200_MEASUREMENTS)


@pytest.fixture(scope="module")
def calibration(measurements):
    return calibrate(measurements, load_gpu("h200-sxm"), SHIPPED_H200_MEASUREMENTS.name)


def test_refit_reproduces_the_shipped_constants(calibration):
    shipped, refit = load_gpu("h200-sxm"), calibration.gpu
    for (name, mine), (_, theirs) in zip(shipped.efficiency, refit.efficiency):
        assert_close(theirs.value, mine.value, rel=0.01, what=name)
    for style, costs in shipped.launch.items():
        for (name, mine), (_, theirs) in zip(costs, refit.launch[style]):
            assert_close(theirs.value, mine.value, rel=0.02, abs_=1e-9, what=f"{style.value}.{name}")


def test_every_fitted_constant_names_the_file(calibration):
    # the fp8 GEMM fractions are not in a bf16 layer file: the calibration carries them over unchanged
    fitted = [(name, c) for name, c in calibration.gpu.efficiency if not name.startswith("fp8_")]
    assert all(SHIPPED_H200_MEASUREMENTS.name in c.source for _, c in fitted)
    carried = calibration.gpu.efficiency.fp8_gemm_compute_fraction
    assert carried == load_gpu("h200-sxm").efficiency.fp8_gemm_compute_fraction
    eager = calibration.gpu.launch
    assert all(SHIPPED_H200_MEASUREMENTS.name in costs.kernel_s.source for costs in eager.values())


@pytest.mark.parametrize("group", LAYER_GROUPS)
def test_layer_groups_are_within_10_percent_mape(calibration, group):
    assert_at_most(calibration.mape_pct(group), 10.0, what=f"MAPE of {group}")


@pytest.mark.parametrize("group", ("gemm", "attention_prefill", "attention_decode"))
def test_microbenchmarks_are_within_10_percent_mape(calibration, group):
    assert_at_most(calibration.mape_pct(group), 10.0, what=f"MAPE of {group}")


def test_every_row_is_reported(calibration, measurements):
    assert len(calibration.layer_rows) == sum(
        len(getattr(measurements, g)) for g in LAYER_GROUPS
    )
    assert len(calibration.micro_rows) == len(measurements.gemm) + len(measurements.attention_prefill) + len(
        measurements.attention_decode
    )


def test_eager_launch_costs_carry_over_to_a_held_out_group(measurements, calibration):
    held_out = held_out_eager_mape(measurements, calibration)
    assert set(held_out) == {"layer_prefill_eager", "layer_decode_eager", "layer_extend"}
    for group, mape in held_out.items():
        assert_at_most(mape, 15.0, what=f"held-out MAPE of {group}")


def test_the_fit_follows_the_data(measurements):
    """Timings twice as slow must give a slower GPU, not the shipped constants."""
    slow = measurements.model_copy(update={
        "gemm": [row.model_copy(update={"seconds": 2 * row.seconds}) for row in measurements.gemm],
    })
    refit = calibrate(slow, load_gpu("h200-sxm")).gpu.efficiency
    shipped = load_gpu("h200-sxm").efficiency
    assert refit.gemm_compute_fraction.value < 0.6 * shipped.gemm_compute_fraction.value
