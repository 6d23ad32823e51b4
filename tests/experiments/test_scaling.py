"""WAN sizing by utilisation, time dilation, and the comparison table's gap flags."""

from __future__ import annotations

import pytest

from services.experiments.comparison import Row, markdown
from loadgen.spec import parse_spec
from services.experiments.dilation import dilate_scenario, dilate_workload, dilation_for, to_emulated_record
from services.experiments.scaling import line_for, report_utilisation, utilisation, wan_price, with_wan
from services.scenario import load_scenario


def test_the_reports_setup_nearly_fills_its_line():
    # 80 req/s x 6554 missed tokens x 4392 bytes x 8 on 20 Gbit/s
    assert report_utilisation() == pytest.approx(80 * 6553.6 * 4392 * 8 / 20e9)
    assert 0.9 < report_utilisation() < 0.93


def test_a_sized_line_carries_its_load_at_the_reports_utilisation():
    line = line_for(2.5, 4000)
    assert utilisation(2.5, 4000, 4392, line) == pytest.approx(report_utilisation())
    assert wan_price(20e9) == pytest.approx(4.5) and wan_price(line) < 4.5


def test_with_wan_sets_rate_and_price():
    scenario = with_wan(load_scenario("paper-pdd"), 5e8)
    assert scenario.wan.rate_bps == 5e8 and scenario.wan_price_per_hour == pytest.approx(wan_price(5e8))


def test_dilation_stretches_durations_and_slows_rates():
    base = load_scenario("paper-pdd")
    slow = dilate_scenario(base, 4)
    assert slow.time_dilation == 4
    assert slow.wan.rate_bps == base.wan.rate_bps / 4 and slow.wan.delay_s == base.wan.delay_s * 4
    assert slow.rdma.rate_bps == base.rdma.rate_bps / 4
    assert slow.sla.ttft_s == base.sla.ttft_s * 4 and slow.pdd.transfer_threshold_s == base.pdd.transfer_threshold_s * 4
    assert dilate_scenario(base, 1) is base
    assert dilation_for(8, 768, 2000) == pytest.approx(8 * 768 / 2000) and dilation_for(1, 768, 2000) == 1


def test_a_dilated_closed_loop_thinks_k_times_longer_and_keeps_the_rest_of_its_workload():
    spec = "agentic:context=16K,output=256..512,turns=6,think=0.5"
    slow = parse_spec(dilate_workload(spec, 3))
    assert slow.think == pytest.approx(1.5)
    assert slow.model_copy(update={"think": 0.5}) == parse_spec(spec)
    default = parse_spec("agentic:turns=4").think
    assert parse_spec(dilate_workload("agentic:turns=4", 2)).think == pytest.approx(2 * default)
    assert dilate_workload("poisson:input=3000,output=200", 2) == "poisson:input=3000,output=200"  # no durations
    assert dilate_workload(spec, 1) == spec
    with pytest.raises(ValueError, match="trace"):
        dilate_workload("mooncake:loadgen/samples/mooncake-sample.jsonl", 2)


def test_records_are_read_back_in_emulated_time():
    record = {"send_s": 8.0, "ttft_s": 2.0, "tpot_s": 0.04, "e2e_s": 10.0, "elapsed_s": 10.0, "itl_s": [0.04],
              "pdd": {"kv_transfer_s": 1.0, "handoff": {"stall_s": 0.2}}}
    out = to_emulated_record(record, 4)
    assert (out["send_s"], out["ttft_s"], out["tpot_s"], out["itl_s"]) == (2.0, 0.5, 0.01, [0.01])
    assert out["pdd"]["kv_transfer_s"] == 0.25 and out["pdd"]["handoff"]["stall_s"] == 0.05
    assert record["ttft_s"] == 2.0  # the input is not changed


def test_gaps_beyond_thirty_percent_are_flagged():
    assert Row("x", 1.0, 1.25).gap is False and Row("x", 1.0, 1.4).gap is True
    assert Row("r", (0.3, 0.4), 0.35).gap is False and Row("r", (0.3, 0.4), 0.6).gap is True
    assert Row("none", 1.0, None).ratio is None
    table = markdown([Row("share", 0.062, 0.05, "%")])
    assert "| share | 6.2% | 5.0% | 0.81 |" in table
