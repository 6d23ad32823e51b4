from __future__ import annotations

from services.engine.fp8_fit import fit_fp8_gemm
from services.profiles import load_gpu
from tests.tolerance import assert_at_most, assert_close


def test_the_shipped_fp8_fractions_come_from_deepgemms_table():
    (compute, bandwidth, blend), errors = fit_fp8_gemm()
    shipped = load_gpu("h200-sxm").efficiency
    assert_close(compute, shipped.fp8_gemm_compute_fraction.value, rel=0.01, what="fp8 compute fraction")
    assert_close(bandwidth, shipped.fp8_gemm_bandwidth_fraction.value, rel=0.01, what="fp8 bandwidth fraction")
    assert_close(blend, shipped.fp8_gemm_blend_exponent.value, rel=0.01, what="fp8 blend exponent")
    assert len(errors) == 22
    assert_at_most(sum(abs(e) for e in errors) / len(errors), 0.11, what="MAPE on DeepGEMM's rows")
