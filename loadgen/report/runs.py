"""A bench output folder read back: its summary and its request records."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadgen.bench.records import read_records
from loadgen.summary import SlaConfig, Summary, summarize


@dataclass(frozen=True)
class RunData:
    path: Path
    summary: Summary
    records: list[dict]

    @property
    def label(self) -> str:
        return self.summary.label

    def ok_records(self) -> list[dict]:
        return [r for r in self.records if r["status"] == "ok"]


def load_run(path: str | Path, sla: SlaConfig | None = None) -> RunData:
    """Read DIR/summary.json and DIR/requests.jsonl; with `sla`, recompute the summary under it."""
    path = Path(path)
    summary_path, records_path = path / "summary.json", path / "requests.jsonl"
    if not summary_path.is_file() or not records_path.is_file():
        raise FileNotFoundError(f"{path} is not a bench output: it needs summary.json and requests.jsonl")
    summary = Summary.model_validate_json(summary_path.read_text(encoding="utf-8"))
    records = read_records(records_path)
    if sla is not None:
        summary = summarize(
            records, sla=sla, workload=summary.workload, offered_rate=summary.offered_rate,
            concurrency=summary.concurrency, label=summary.label, cost_per_hour=summary.cost_per_hour,
            skipped_arrivals=summary.skipped_arrivals, interrupted=summary.interrupted,
        )
    return RunData(path, summary, records)


def distinct_labels(runs: list[RunData]) -> list[str]:
    """Run labels made unique: a repeated mode gets its offered rate or folder name appended."""
    labels = [run.label for run in runs]
    result = []
    for run, label in zip(runs, labels):
        if labels.count(label) > 1:
            rate = run.summary.offered_rate
            label = f"{label} @ {rate:g} req/s" if rate is not None else f"{label} ({run.path.name})"
        result.append(label)
    return result
