"""The comparison's last words: the winner and why, in plain text, with the report's path last."""

from pathlib import Path

from loadgen.report.table import text_table
from loadgen.report.verdict import binding_stage, summary_lines, ttft_phases, winner
from tests.loadgen.comparison import comparison_runs


def test_equal_goodput_is_decided_by_the_tail_and_the_binding_stages_are_named():
    runs = comparison_runs()
    index, criterion = winner(runs)
    assert criterion == "TTFT P99" and runs[index].label == "pd-intra"
    assert binding_stage(runs[1]).phase == "KV transfer" and binding_stage(runs[1]).share > 0.5  # pd-cross
    assert binding_stage(runs[2]).phase != "KV transfer"  # pdd: the relay answers while the KV crosses
    lines = summary_lines(runs, Path("/out/report/index.html"), extra=["Planner: buy pdd."])
    assert lines[0].startswith("Winner: pd-intra") and "TTFT P99" in lines[0]
    assert any(line.startswith("Why:") and "pd-cross KV transfer" in line for line in lines)
    assert any("pdd takes the WAN out of the wait that binds pd-cross" in line for line in lines)
    assert lines[-2:] == ["Planner: buy pdd.", "Report: /out/report/index.html"]
    assert not any(mark in "\n".join(lines) for mark in ("|", "![", "**", "#"))


def test_a_clear_goodput_lead_wins_on_goodput():
    runs = comparison_runs()
    slow = runs[1]
    ok = slow.ok_records()
    late = [{**r, "ttft_s": 9.0} if i % 2 else r for i, r in enumerate(ok)]  # half miss the 5 s TTFT limit
    from loadgen.report.runs import RunData
    from loadgen.summary import summarize

    summary = summarize(late, sla=slow.summary.sla, workload="w", offered_rate=1.0, label="pd-cross")
    runs[1] = RunData(slow.path, summary.model_copy(update={"mode": "pd-cross"}), late)
    runs = [runs[1], runs[0]]
    index, criterion = winner(runs)
    assert criterion == "SLA goodput" and runs[index].label == "pd-intra"


def test_phases_before_the_first_token_add_up_to_the_servers_wait():
    record = comparison_runs()[1].ok_records()[0]
    timeline = record["pdd"]["timeline"]
    spent = ttft_phases(record)
    assert abs(sum(spent.values()) - (timeline["first_token"] - timeline["received"])) < 1e-9


def test_the_terminal_table_is_plain_aligned_text():
    table = text_table(comparison_runs())
    lines = table.splitlines()
    assert len(lines) == 4 and "|" not in table and "---" not in table
    assert lines[0].split()[0] == "run" and "BCR" in lines[0]
    assert len({len(line) for line in lines[1:]}) == 1  # right-aligned columns end together
