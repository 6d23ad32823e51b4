"""A chaos run's report: outcome counts, the faults with their recovery, leaks, and the verdict."""

from __future__ import annotations

import collections
import json
from dataclasses import asdict, dataclass, field

from services.chaos.faults import Window
from services.chaos.outcomes import KINDS, Outcome
from services.chaos.recovery import MIN_HEALTHY_RUN, Baseline, healthy_run_start, ttft_p99


@dataclass
class PhaseReport:
    name: str
    start_s: float
    end_s: float
    counts: dict[str, int]  # outcomes of the requests that ended from the fault's start to the next fault's start
    ttft_p99_fault_s: float | None
    recovery_s: float | None  # None: not back to the baseline before the observation ended
    notes: dict = field(default_factory=dict)


@dataclass
class ChaosReport:
    scenario: str
    mode: str
    quick: bool
    mesh: str
    counts: dict[str, int]
    by_tag: dict[str, dict[str, int]]
    errors: dict[str, int]  # failed and lost requests grouped by status (or kind) and message
    during_faults: dict[str, int]  # requests sent during a fault by how they were served: policy reason or 429
    baseline: dict
    phases: list[PhaseReport]
    leaks: list[str]
    rss_kib: dict[str, dict[str, int | None]]  # process -> {"start", "end"}
    violations: list[str]
    duration_s: float

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def recovery_s(self) -> float | None:
        """The slowest recovery of the run's faults (None if one did not recover)."""
        values = [p.recovery_s for p in self.phases]
        return None if not values or None in values else max(values)

    def to_json(self) -> str:
        data = asdict(self)
        data.update({k: data["counts"][k] for k in ("sent", *KINDS)}, recovery_s=self.recovery_s, ok=self.ok)
        return json.dumps(data, indent=2)

    def to_text(self) -> str:
        c = self.counts
        lines = [f"chaos {self.scenario} on {self.mesh} ({self.mode}{', quick' if self.quick else ''}): "
                 f"{'OK' if self.ok else 'INVARIANTS VIOLATED'} in {self.duration_s:.0f} s",
                 f"  sent {c['sent']}  completed {c['completed']}  failed {c['failed']}  lost {c['lost']}  "
                 f"corrupted {c['corrupted']}  abandoned {c['abandoned']}",
                 f"  baseline: {self.baseline['throughput_rps']:.2f} req/s, TTFT p50 {self.baseline['ttft_p50_s']:.3f} s,"
                 f" p99 {self.baseline['ttft_p99_s']:.3f} s (healthy bound {self.baseline['ttft_bound_s']:.2f} s)"]
        for p in self.phases:
            pc = p.counts
            lines.append(f"  {p.name}: {p.start_s:.1f}-{p.end_s:.1f} s, sent {pc['sent']} completed {pc['completed']} "
                         f"failed {pc['failed']} lost {pc['lost']}; TTFT p99 during fault {_s(p.ttft_p99_fault_s)}; "
                         f"recovery_s {_s(p.recovery_s)}")
            if p.notes:
                lines.append(f"    {json.dumps(p.notes)}")
        lines.append(f"  recovery_s {_s(self.recovery_s)}")
        if self.during_faults:
            lines.append(f"  served during the faults: {json.dumps(self.during_faults)}")
        for label, count in list(self.errors.items())[:6]:
            lines.append(f"  error x{count}: {label}")
        lines.append(f"  leaks: {'none' if not self.leaks else '; '.join(self.leaks)}")
        rss = ", ".join(f"{n} {v['start']}->{v['end']}" for n, v in self.rss_kib.items())
        lines.append(f"  RSS KiB at rest (before faults -> after): {rss}")
        lines += [f"  VIOLATION: {v}" for v in self.violations]
        return "\n".join(lines)


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def count(outcomes: list[Outcome]) -> dict[str, int]:
    kinds = collections.Counter(o.kind for o in outcomes)
    return {"sent": len(outcomes), **{k: kinds.get(k, 0) for k in KINDS}}


def error_groups(outcomes: list[Outcome]) -> dict[str, int]:
    groups = collections.Counter(o.error_label() for o in outcomes if o.kind in ("failed", "lost", "corrupted"))
    return dict(groups.most_common())


def phase_reports(windows: list[Window], steady: list[Outcome], everything: list[Outcome], baseline: Baseline,
                  observed_until_s: float) -> list[PhaseReport]:
    reports = []
    for i, window in enumerate(windows):
        last = i + 1 == len(windows)
        until = observed_until_s if last else windows[i + 1].start_s
        start, length = healthy_run_start(steady, window.end_s, until, baseline.ttft_bound_s, float("inf"),
                                          ended_by_s=float("inf") if last else until)
        recovery = start - window.end_s if start is not None and length >= MIN_HEALTHY_RUN else None
        # A request belongs to the fault during whose span it ended: one killed mid-stream was sent earlier.
        ended = [o for o in everything if window.start_s <= o.end_s and (last or o.end_s < until)]
        reports.append(PhaseReport(window.name, round(window.start_s, 2), round(window.end_s, 2), count(ended),
                                   ttft_p99(steady, window.start_s, window.end_s),
                                   None if recovery is None else round(recovery, 3), window.notes))
    return reports
