"""The plan spec: the shipped mini spec loads, flags override it, and every bad input is one clear line."""

from __future__ import annotations

import pytest

from services.cli import main
from services.plan.spec import PlanError, SPECS, load_spec

MINI = str(SPECS / "mini.yaml")


def test_the_shipped_mini_spec_loads_with_its_units_parsed():
    spec = load_spec(MINI)
    assert spec.model == "llama3-8b" and spec.objective == "max-goodput"
    assert [line.rate_bps for line in spec.wan] == [10e9, 20e9]
    assert spec.slo.tpot_s == pytest.approx(0.1) and spec.dc_a == "dc-a" and spec.dc_b == "dc-b"


def test_overrides_replace_fields_and_the_objective():
    spec = load_spec(MINI, ["budget_per_hour=null", "target_rps=5", "slo.ttft_s=3s", "architectures=[pdd]"])
    assert spec.objective == "min-cost" and spec.target_rps == 5
    assert spec.slo.ttft_s == 3.0 and spec.architectures == ("pdd",)


@pytest.mark.parametrize("overrides, words", [
    (["target_rps=5"], "exactly one objective"),
    (["budget_per_hour=null"], "exactly one objective"),
    (["model=gpt-9"], "unknown model 'gpt-9'"),
    (["gpus.dc-b.gpu=tpu-v9"], "unknown GPU 'tpu-v9'"),
    (["wan=[]"], "need at least one line option"),
    (["workload=agentic:contxt=4K"], "workload"),
    (["workload=mooncake:loadgen/samples/mooncake-sample.jsonl"], "a trace is not planned yet"),
    (["slo.attainment=0.5"], "slo.attainment"),
    (["budget_per_hour=-3"], "budget_per_hour"),
    (["architectures=[pdd, pdd]"], "twice"),
    (["nonsense"], "key=value"),
])
def test_bad_input_names_the_field(overrides, words):
    with pytest.raises(PlanError) as caught:
        load_spec(MINI, overrides)
    message = str(caught.value)
    assert words in message and "\n" not in message


def test_a_missing_or_malformed_file_is_refused(tmp_path):
    with pytest.raises(PlanError, match="does not exist"):
        load_spec(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(PlanError, match="not valid YAML"):
        load_spec(bad)
    bad.write_text("- a list\n")
    with pytest.raises(PlanError, match="must be a YAML mapping"):
        load_spec(bad)


@pytest.mark.parametrize("argv, words", [
    (["--spec", "missing.yaml"], "does not exist"),
    (["--spec", MINI, "--budget", "10", "--target-rps", "3"], "not both"),
    (["--spec", MINI, "--architectures", "pdd,warp"], "architectures"),
    (["--spec", MINI, "--seeds", "0"], "seeds"),
    (["--spec", MINI, "--workers", "0"], "--workers"),
])
def test_the_cli_refuses_bad_input_with_one_line_and_exit_2(argv, words, capsys, tmp_path):
    with pytest.raises(SystemExit) as caught:
        main(["plan", *argv, "--out", str(tmp_path)])
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1 and err.startswith("pdd-emu: error:")


def test_scaling_prices_scales_the_gpus_lines_and_budget():
    spec = load_spec(MINI)
    scaled = spec.scaled_prices(3.0)
    assert scaled.budget_per_hour == pytest.approx(3 * spec.budget_per_hour)
    assert scaled.gpus["dc-b"].price_per_hour == pytest.approx(3 * spec.gpus["dc-b"].price_per_hour)
    assert scaled.wan[1].price_per_hour == pytest.approx(3 * spec.wan[1].price_per_hour)
