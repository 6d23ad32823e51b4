"""A deterministic backend's points, each run once however many searches ask for it.

The full run asks the simulator for the same point many times over (docs/results.md,
"Economics: method"): three of the four arms are the base deployments unchanged,
the price parameters (GPU-B premium, line price) change what a deployment costs
but nothing it does, and the relay-size and pipeline-threshold cases leave the
two deployments without a relay as they were. A simulated point is a function of
(scenario, workload, load, seed) (tests/experiments/economics/test_simpoint.py),
and prices only enter the figures through the cost (services/scenario/cost.py), so
a point asked for again, or asked for at other prices, is the point already run.

With a `store` every point is also kept on disk, one JSON file each, under a key that
adds the backend's settings and a fingerprint of the emulator's source: a run told to
`resume` starts from the points an earlier run of the same code and settings left there
(a full run is hours; one stopped midway loses only the points in flight).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from functools import cache
from pathlib import Path

from services.experiments.economics.loadpoint import LoadPointRunner, PointResult
from services.scenario import Scenario

PRICE_FIELDS = frozenset({"price_per_hour", "wan_price_per_hour"})  # read by services/scenario/cost.py only
SOURCE_PACKAGES = ("services", "loadgen", "netem")  # what a simulated point's result depends on


@cache
def code_fingerprint() -> str:
    """A hash of every source and data file of the emulator's packages: stored points from other code are stale."""
    root = Path(__file__).resolve().parents[3]
    digest = hashlib.sha256()
    for package in SOURCE_PACKAGES:
        for path in sorted((root / package).rglob("*")):
            if path.suffix in (".py", ".yaml", ".yml", ".proto", ".json") and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _without_prices(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_prices(v) for k, v in value.items() if k not in PRICE_FIELDS}
    if isinstance(value, list):
        return [_without_prices(v) for v in value]
    return value


def point_key(scenario: Scenario, workload: str, load: float, seed: int) -> str:
    """What a simulated point depends on: the whole scenario but its prices, the workload, the load and the seed."""
    what = _without_prices(scenario.model_dump(mode="json"))
    return json.dumps([what, workload, float(load), seed], sort_keys=True)


class PointMemo:
    """`runner`'s points by `point_key`: a point asked for again (or while it runs) is answered from the first run."""

    def __init__(self, runner: LoadPointRunner, store: Path | None = None, resume: bool = False) -> None:
        self.runner = runner
        self.backend = runner.backend
        self.parallel = getattr(runner, "parallel", False)
        self.stops_at_verdict = getattr(runner, "stops_at_verdict", False)
        self.store = store
        self._points: dict[str, asyncio.Future[PointResult]] = {}
        self._stored: dict[str, PointResult] = {}  # read from the store at start (resume)
        self.run = self.reused = self.loaded = 0
        if store is not None and resume:
            self._load(store)

    def _key(self, scenario: Scenario, workload: str, load: float, seed: int, whole: bool) -> str:
        key = point_key(scenario, workload, load, seed) + (" whole" if whole else "")
        if self.store is None:
            return key
        return json.dumps([key, self.settings(), code_fingerprint()])

    def settings(self) -> dict:
        """The runner's settings a point depends on (SimulatedPoints.settings), or none."""
        return getattr(self.runner, "settings", dict)()

    async def run_point(self, scenario: Scenario, workload: str, load: float, seed: int, whole: bool = False
                        ) -> PointResult:
        key = self._key(scenario, workload, load, seed, whole)
        if key in self._stored:
            self.reused += 1
            return self._stored[key]
        point = self._points.get(key)
        if point is None:
            point = self._points[key] = asyncio.ensure_future(self._run(key, scenario, workload, load, seed, whole))
            self.run += 1
        else:
            self.reused += 1
        return await point

    async def _run(self, key: str, scenario: Scenario, workload: str, load: float, seed: int, whole: bool
                   ) -> PointResult:
        whole_window = {"whole": True} if whole else {}  # asked only of a runner that stops at verdicts
        point = await self.runner.run_point(scenario, workload, load, seed, **whole_window)
        if self.store is not None:
            self.store.mkdir(parents=True, exist_ok=True)
            name = hashlib.sha256(key.encode()).hexdigest()[:20]
            (self.store / f"{name}.json").write_text(json.dumps({"key": key, "point": point.as_dict()}) + "\n")
        return point

    def _load(self, store: Path) -> None:
        for path in sorted(store.glob("*.json")):
            stored = json.loads(path.read_text())
            self._stored[stored["key"]] = PointResult.from_dict(stored["point"])
        self.loaded = len(self._stored)

    def close(self) -> None:
        close = getattr(self.runner, "close", None)
        if close is not None:
            close()
