"""Launches requests as tasks, writes each record as it completes, and stops cleanly.

Two stop signals: `stop_sending` (duration or request count reached: in-flight
requests finish within their deadlines) and `interrupt` (Ctrl-C: in-flight
requests are cancelled and recorded as such).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from tqdm import tqdm

from loadgen.bench.records import RequestRecord
from loadgen.plan import RequestPlan, Session

Sender = Callable[[RequestPlan, float], Awaitable[tuple[RequestRecord, list[int]]]]
OnDone = Callable[[RequestPlan, Session, RequestRecord, list[int]], None]


class RunClock:
    """Seconds since the run started, and sleeps that end early when sending stops."""

    def __init__(self, duration_s: float, stop_sending: asyncio.Event) -> None:
        self.start = time.perf_counter()
        self.duration_s = duration_s
        self._stop = stop_sending

    def now(self) -> float:
        return time.perf_counter() - self.start

    async def sleep_until(self, offset_s: float) -> bool:
        """Wait until `offset_s`; False if sending stopped first (or the duration ends before it)."""
        if offset_s >= self.duration_s:
            await self._stop.wait()
            return False
        delay = offset_s - self.now()
        if delay > 0:
            try:
                await asyncio.wait_for(self._stop.wait(), timeout=delay)
            except TimeoutError:
                pass
        return not self._stop.is_set()


class Recorder:
    """Appends each record to requests.jsonl as it completes, so an abrupt end loses nothing sent."""

    def __init__(self, path: Path, progress: bool, total: int | None) -> None:
        self.records: list[RequestRecord] = []
        self._file = open(path, "w", encoding="utf-8")
        self._bar = tqdm(total=total, unit="req", desc="bench", disable=not progress, file=sys.stderr,
                         dynamic_ncols=True)
        self._failed = 0

    def add(self, record: RequestRecord) -> None:
        self.records.append(record)
        self._file.write(record.to_json_line() + "\n")
        self._file.flush()
        self._failed += record.status in ("error", "timeout")
        self._bar.update(1)
        self._bar.set_postfix(failed=self._failed, refresh=False)

    def close(self) -> None:
        self._bar.close()
        self._file.close()


class Dispatcher:
    def __init__(
        self, send: Sender, recorder: Recorder, clock: RunClock, max_requests: int | None, stop_sending: asyncio.Event
    ) -> None:
        self._send = send
        self._recorder = recorder
        self._clock = clock
        self._max_requests = max_requests
        self.stop_sending = stop_sending
        self.interrupted = False
        self.in_flight: dict[asyncio.Task, RequestPlan] = {}
        self.sent = 0
        self.skipped_arrivals = 0
        self.faults: list[BaseException] = []

    def can_send(self) -> bool:
        return not self.stop_sending.is_set()

    def launch(self, plan: RequestPlan, session: Session, on_done: OnDone | None) -> asyncio.Task:
        self.sent += 1
        if self._max_requests is not None and self.sent >= self._max_requests:
            self.stop_sending.set()
        task = asyncio.ensure_future(self._run(plan, session, on_done, self._clock.now()))
        self.in_flight[task] = plan
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task) -> None:
        plan = self.in_flight.pop(task)
        if task.cancelled():  # cancelled before it started: it left no record of its own
            self._recorder.add(cancelled_record(plan, self._clock.now()))
        elif task.exception() is not None:  # a fault in the client itself, not a failed request: stop the run
            self.faults.append(task.exception())
            self.stop_sending.set()

    @staticmethod
    async def result(task: asyncio.Task) -> tuple[RequestRecord, list[int]] | None:
        """The task's outcome, or None if it was cancelled before it started."""
        await asyncio.wait({task})
        return None if task.cancelled() else task.result()

    async def _run(
        self, plan: RequestPlan, session: Session, on_done: OnDone | None, send_s: float
    ) -> tuple[RequestRecord, list[int]]:
        record, output_ids = await self._send(plan, send_s)
        self._recorder.add(record)
        if on_done is not None and not self.interrupted:
            on_done(plan, session, record, output_ids)
        return record, output_ids

    def interrupt(self) -> None:
        """Ctrl-C: send nothing more and cancel what is in flight (each still leaves a record)."""
        self.interrupted = True
        self.stop_sending.set()
        for task in list(self.in_flight):
            task.cancel()

    async def drain(self) -> None:
        """Wait for every request in flight; re-raise the first fault of the client, if any."""
        while self.in_flight:
            await asyncio.wait(list(self.in_flight))
        if self.faults:
            raise self.faults[0]


def cancelled_record(plan: RequestPlan, send_s: float) -> RequestRecord:
    record = RequestRecord.sent(plan, send_s)
    record.status, record.error, record.elapsed_s = "cancelled", "run interrupted", 0.0
    return record
