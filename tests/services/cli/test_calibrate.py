"""`pdd-emu calibrate`: report on the shipped file, write a profile copy, refuse bad files."""

from __future__ import annotations

import json

import yaml

from services.profiles import SHIPPED_H200_MEASUREMENTS, gpu_names, load_gpu
from tests.services.cli.in_process import cli  # noqa: F401  (the fixture)


def test_report_lists_constants_rows_and_mape(cli):
    code, out, err = cli("calibrate", str(SHIPPED_H200_MEASUREMENTS), "--gpu", "h200-sxm")
    assert code == 0, err
    for text in ("gemm_compute_fraction", "eager.kernel_s", "layer_decode_cuda_graph", "B=256 C=8192", "MAPE"):
        assert text in out
    assert "wrote" not in out


def test_markdown_tables(cli):
    code, out, _ = cli("calibrate", str(SHIPPED_H200_MEASUREMENTS), "--gpu", "h200-sxm", "--markdown")
    assert code == 0
    assert "| group | row | measured us | predicted us | error % |" in out


def test_out_writes_a_full_profile_file_with_the_fit(cli, tmp_path):
    target = tmp_path / "gpus.yaml"
    code, out, _ = cli("calibrate", str(SHIPPED_H200_MEASUREMENTS), "--gpu", "h200-sxm", "--out", str(target))
    assert code == 0 and str(target) in out
    written = yaml.safe_load(target.read_text())
    assert set(written) == set(gpu_names())
    fitted = written["h200-sxm"]["efficiency"]["gemm_compute_fraction"]
    assert abs(fitted["value"] - load_gpu("h200-sxm").efficiency.gemm_compute_fraction.value) < 0.01
    assert "h200-llama3-8b-layers.json" in fitted["source"]


def test_unknown_gpu_exits_2_naming_the_choices(cli):
    code, _, err = cli("calibrate", str(SHIPPED_H200_MEASUREMENTS), "--gpu", "mi300x")
    assert code == 2
    assert all(name in err for name in gpu_names())


def test_missing_file_exits_2(cli, tmp_path):
    code, _, err = cli("calibrate", str(tmp_path / "nothing.json"), "--gpu", "h200-sxm")
    assert code == 2 and "cannot read" in err


def test_malformed_file_exits_2_naming_the_field(cli, tmp_path):
    data = json.loads(SHIPPED_H200_MEASUREMENTS.read_text())
    data["attention_decode"] = "fast"
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    code, _, err = cli("calibrate", str(path), "--gpu", "h200-sxm")
    assert code == 2 and "attention_decode" in err


def test_not_json_exits_2(cli, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("H200 was fast\n")
    code, _, err = cli("calibrate", str(path), "--gpu", "h200-sxm")
    assert code == 2 and "not JSON" in err


def test_write_and_out_together_are_refused(cli, tmp_path):
    code, _, err = cli("calibrate", str(SHIPPED_H200_MEASUREMENTS), "--gpu", "h200-sxm", "--write",
                       "--out", str(tmp_path / "x.yaml"))
    assert code == 2 and "not allowed" in err
