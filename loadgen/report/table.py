"""The comparison table: latency percentiles, SLA goodput, cost and BCR, RLD share, WAN volume."""

from __future__ import annotations

import html

from loadgen.report.runs import RunData, distinct_labels
from loadgen.stats import Percentiles


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _triple(p: Percentiles) -> list[str]:
    return [_seconds(p.p50), _seconds(p.p90), _seconds(p.p99)]


def table_rows(runs: list[RunData]) -> tuple[list[str], list[list[str]]]:
    with_cost = any(run.summary.cost_per_hour is not None for run in runs)
    header = ["run", "offered req/s", "sent req/s", "concurrency", "sent", "ok", "TTFT P50 s", "TTFT P90 s",
              "TTFT P99 s",
              "TPOT P50 s", "TPOT P90 s", "TPOT P99 s", "E2E P50 s", "E2E P90 s", "E2E P99 s",
              "SLA goodput req/s", "within SLA"]
    if with_cost:
        header += ["cost $/h", "BCR"]
    header += ["RLD share", "WAN GB"]
    rows = []
    for run, label in zip(runs, distinct_labels(runs)):
        s = run.summary
        rate = f"{s.offered_rate:g}" if s.offered_rate is not None else "-" if s.concurrency else "trace"
        concurrency = str(s.concurrency) if s.concurrency else "-"  # closed loop: users, not a rate
        sent_rate = f"{s.sent / s.window_s:.3f}" if s.window_s else "-"
        row = [label, rate, sent_rate, concurrency, str(s.sent), str(s.completed), *_triple(s.ttft_s),
               *_triple(s.tpot_s), *_triple(s.e2e_s),
               f"{s.goodput_rps:.3f}", f"{s.sla_attainment:.1%}"]
        if with_cost:
            row += ["-" if s.cost_per_hour is None else f"{s.cost_per_hour:.2f}",
                    "-" if s.bcr is None else f"{s.bcr:.4f}"]
        row += ["-" if s.rld_token_share is None else f"{s.rld_token_share:.1%}", f"{s.wan_bytes / 1e9:.3f}"]
        rows.append(row)
    return header, rows


TERMINAL_COLUMNS = ("run", "sent req/s", "sent", "ok", "TTFT P50 s", "TTFT P90 s", "TTFT P99 s", "TPOT P50 s",
                    "SLA goodput req/s", "within SLA", "cost $/h", "BCR", "RLD share")


def text_table(runs: list[RunData]) -> str:
    """The table's main columns as aligned plain text, for a terminal (the report has them all)."""
    header, rows = table_rows(runs)
    keep = [i for i, name in enumerate(header) if name in TERMINAL_COLUMNS]
    cells = [[header[i] for i in keep]] + [[row[i] for i in keep] for row in rows]
    widths = [max(len(line[c]) for line in cells) for c in range(len(keep))]
    lines = ["  ".join(cell.ljust(w) if c == 0 else cell.rjust(w) for c, (cell, w) in enumerate(zip(line, widths)))
             for line in cells]
    return "\n".join(line.rstrip() for line in lines)


def markdown_table(runs: list[RunData]) -> str:
    header, rows = table_rows(runs)
    rule = "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"
    lines = ["| " + " | ".join(header) + " |", rule]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    sla = runs[0].summary.sla if runs else None
    note = f"\n\nSLA: TTFT <= {sla.ttft_s:g} s and TPOT <= {sla.tpot_s:g} s." if sla else ""
    return "\n".join(lines) + note + "\n"


def html_table(runs: list[RunData]) -> str:
    header, rows = table_rows(runs)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
