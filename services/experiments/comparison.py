"""The side-by-side table every experiment prints: paper | emulated | ratio, with large gaps flagged."""

from __future__ import annotations

from dataclasses import dataclass

GAP_TO_EXPLAIN = 0.30  # docs/results.md explains every gap larger than this


@dataclass(frozen=True)
class Row:
    name: str
    paper: float | tuple[float, float] | None  # a range when the report gives one
    emulated: float | None
    unit: str = ""  # "s", "%" (a fraction shown as percent), "" (plain)

    @property
    def ratio(self) -> float | None:
        """emulated / paper (a range's middle); None when either is missing or the paper says 0."""
        paper = sum(self.paper) / 2 if isinstance(self.paper, tuple) else self.paper
        if paper in (None, 0) or self.emulated is None:
            return None
        return self.emulated / paper

    @property
    def gap(self) -> bool:
        """True when the emulated value lies more than 30% outside the paper's value or range."""
        if self.emulated is None or self.paper is None:
            return False
        low, high = self.paper if isinstance(self.paper, tuple) else (self.paper, self.paper)
        if low <= self.emulated <= high:
            return False
        nearest = low if self.emulated < low else high
        return nearest == 0 or abs(self.emulated - nearest) > GAP_TO_EXPLAIN * abs(nearest)


def _value(value: float | tuple[float, float] | None, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, tuple):
        return " to ".join(_value(v, unit) for v in value)
    if unit == "%":
        return f"{value * 100:.1f}%"
    if unit == "s":
        return f"{value:.3g} s"
    return f"{value:.3g}"


def markdown(rows: list[Row], title: str = "") -> str:
    lines = [f"**{title}**", ""] if title else []
    lines += ["| figure | paper | emulated | ratio |", "| --- | --- | --- | --- |"]
    for row in rows:
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}" + (" (gap > 30%)" if row.gap else "")
        lines.append(f"| {row.name} | {_value(row.paper, row.unit)} | {_value(row.emulated, row.unit)} | {ratio} |")
    return "\n".join(lines)
