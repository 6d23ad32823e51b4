"""Run one named experiment, quick or full, and write its report: OUT/result.json, OUT/report.md, OUT/*.png.

Every experiment returns its headline figures (what `--json` prints), the
comparison rows against the report, and the data behind them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from services.experiments.comparison import Row, markdown

Log = Callable[[str], None]


@dataclass
class ExperimentResult:
    name: str
    quick: bool
    headline: dict
    rows: list[Row]
    data: dict
    notes: list[str] = field(default_factory=list)  # tables and lines for report.md, in order
    images: list[Path] = field(default_factory=list)
    wall_s: float = 0.0

    def markdown(self) -> str:
        mode = "quick" if self.quick else "full"
        parts = [f"# experiment {self.name} ({mode}, {self.wall_s:.0f} s)", "", *self.notes, "",
                 markdown(self.rows, "paper | emulated | ratio")]
        parts += [f"![{image.stem}]({image.name})" for image in self.images]
        return "\n".join(parts) + "\n"


async def _paper(quick: bool, out: Path, log: Log) -> ExperimentResult:
    from services.experiments.paper_report import paper_experiment

    return await paper_experiment(quick, out, log)


async def _bathtub(quick: bool, out: Path, log: Log) -> ExperimentResult:
    from services.experiments.bathtub_report import bathtub_experiment

    return bathtub_experiment(quick, out, log)


async def _handoff(quick: bool, out: Path, log: Log) -> ExperimentResult:
    from services.experiments.micro_reports import handoff_experiment

    return await handoff_experiment(quick, out, log)


async def _wan(quick: bool, out: Path, log: Log) -> ExperimentResult:
    from services.experiments.micro_reports import wan_experiment

    return await wan_experiment(quick, out, log)


async def _economics(quick: bool, out: Path, log: Log, **options) -> ExperimentResult:
    from services.experiments.economics.experiment import economics_experiment

    return await economics_experiment(quick, out, log, **options)


EXPERIMENTS: dict[str, Callable[..., Awaitable[ExperimentResult]]] = {
    "paper": _paper, "bathtub": _bathtub, "handoff": _handoff, "wan": _wan, "economics": _economics,
}
SEEDED = ("economics",)  # the experiments that take --seeds, --backend, --workers, --workload, --resume, ...


async def run_experiment(name: str, quick: bool, out: Path, log: Log = print, **options) -> ExperimentResult:
    """Run one experiment; `options` (seeds, backend, workers, ...) are economics's keyword options."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; choose one of {', '.join(EXPERIMENTS)}")
    if options and name not in SEEDED:
        raise ValueError(f"{', '.join(options)}: options of {', '.join(SEEDED)} only, not of {name}")
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    result = await EXPERIMENTS[name](quick, out, log, **options)
    result.wall_s = time.monotonic() - started
    (out / "result.json").write_text(json.dumps({"headline": result.headline, "quick": quick,
                                                 "wall_s": result.wall_s, **result.data}, indent=2,
                                                default=str) + "\n")
    (out / "report.md").write_text(result.markdown())
    return result
