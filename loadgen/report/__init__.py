"""Reports: bench outputs in, a markdown table, PNG plots and OUT/index.html out."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from loadgen.report.page import write_index
from loadgen.report.plots import plot_goodput_vs_rate, plot_hit_histogram, plot_ttft_cdf, plot_wan_throughput
from loadgen.report.runs import RunData, load_run
from loadgen.report.table import markdown_table
from loadgen.report.timeline import plot_request_timeline
from loadgen.summary import SlaConfig


@dataclass(frozen=True)
class Report:
    runs: list[RunData]
    markdown: str
    images: dict[str, Path]  # title -> PNG
    index: Path


def build_report(run_dirs: Sequence[str | Path], out_dir: str | Path, sla: SlaConfig | None = None,
                 wan_rate_bps: float | None = None,
                 notes: Mapping[str, str] | Callable[[list[RunData]], Mapping[str, str]] | None = None) -> Report:
    """Read each bench output folder and write OUT/report.md, the PNGs and OUT/index.html.

    With `sla`, every run's goodput and attainment are recomputed from its records under it; with
    `wan_rate_bps`, the WAN plot draws the line rate and never goes above it. `notes` (or a function
    of the runs that makes them) puts a sentence beside the table or a figure, keyed as captions.py.
    """
    if not run_dirs:
        raise ValueError("a report needs at least one bench output folder")
    runs = [load_run(path, sla) for path in run_dirs]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    markdown = markdown_table(runs)
    (out / "report.md").write_text("# pdd-emu report\n\n" + markdown, encoding="utf-8")
    images = {
        "TTFT CDF": plot_ttft_cdf(runs, out / "ttft_cdf.png"),
        "Prefix-hit rates": plot_hit_histogram(runs, out / "hit_rate_bins.png"),
        "WAN throughput": plot_wan_throughput(runs, out / "wan_throughput.png", wan_rate_bps),
        "One request's timeline": plot_request_timeline(runs, out / "request_timeline.png"),
    }
    goodput = plot_goodput_vs_rate(runs, out / "goodput_vs_rate.png")
    if goodput is not None:
        images["SLA goodput against offered rate"] = goodput
    if callable(notes):
        notes = notes(runs)
    return Report(runs, markdown, images, write_index(out, runs, images, notes))


__all__ = ["Report", "build_report", "load_run"]
