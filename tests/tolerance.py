"""The one place where tests compare measured times: loose sanity bounds only.

Precise timing is measured by the benchmarks under benchmarks/; a unit test
only checks that a time is in the right neighbourhood, so a loaded 2-core CI
machine does not turn scheduling noise into failures.
"""

from __future__ import annotations


def assert_close(actual: float, expected: float, rel: float, abs_: float = 0.0, what: str = "value") -> None:
    """Fail unless |actual - expected| <= max(rel * |expected|, abs_)."""
    bound = max(rel * abs(expected), abs_)
    if abs(actual - expected) > bound:
        raise AssertionError(
            f"{what}: {actual!r} differs from {expected!r} by {abs(actual - expected):.6g} (allowed {bound:.6g})"
        )


def assert_at_least(actual: float, floor: float, what: str = "value") -> None:
    if actual < floor:
        raise AssertionError(f"{what}: {actual!r} is below {floor!r}")


def assert_at_most(actual: float, ceiling: float, what: str = "value") -> None:
    if actual > ceiling:
        raise AssertionError(f"{what}: {actual!r} is above {ceiling!r}")
