"""The measurement file format: the shipped copy reads, broken files fail with the field at fault."""

from __future__ import annotations

import json

import pytest

from services.profiles import SHIPPED_H200_MEASUREMENTS
from services.profiles.measurement import MeasurementError, read_measurements


def test_the_shipped_h200_file_reads():
    m = read_measurements(SHIPPED_H200_MEASUREMENTS)
    assert m.device == "NVIDIA H200"
    assert len(m.gemm) == 24 and len(m.layer_decode_cuda_graph) == 13
    assert m.layer.hidden == 4096 and m.layer.kv_heads == 8
    assert [r.tokens for r in m.layer_prefill_eager] == [512, 2048, 8192, 32768]


def test_a_missing_file_is_a_measurement_error(tmp_path):
    with pytest.raises(MeasurementError, match="cannot read"):
        read_measurements(tmp_path / "absent.json")


def test_text_that_is_not_json_is_a_measurement_error(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("device: H200\n")
    with pytest.raises(MeasurementError, match="not JSON"):
        read_measurements(path)


def test_a_missing_section_is_named(tmp_path):
    data = json.loads(SHIPPED_H200_MEASUREMENTS.read_text())
    del data["gemm"]
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(data))
    with pytest.raises(MeasurementError, match="gemm"):
        read_measurements(path)


def test_a_negative_time_is_named(tmp_path):
    data = json.loads(SHIPPED_H200_MEASUREMENTS.read_text())
    data["layer_extend"][0]["seconds"] = -1.0
    path = tmp_path / "negative.json"
    path.write_text(json.dumps(data))
    with pytest.raises(MeasurementError, match="layer_extend.0.seconds"):
        read_measurements(path)


def test_a_json_list_is_refused(tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(MeasurementError, match="JSON object"):
        read_measurements(path)
