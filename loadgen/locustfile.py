"""Locust streaming user for the router's OpenAI-compatible API, driven by the loadgen workloads.

    PDD_WORKLOAD='agentic:context=16K' locust -f loadgen/locustfile.py --headless \
        -u 4 -r 4 -t 10s --csv out/locust --host http://127.0.0.1:8000

Each streamed completion is one POST row (timing the response headers) and
fires one event each of TTFT, TPOT, ITL and E2E, in milliseconds, so every row
counts requests. The ITL row holds the request's largest gap (its stall); every
gap goes into `<csv prefix>_itl.csv` (count, mean, percentiles) when Locust
stops, instead of thousands of pseudo-requests in the statistics. Environment: PDD_WORKLOAD (a workload SPEC),
PDD_MODEL (default: the first of GET /v1/models), PDD_SEED, PDD_TIMEOUT_S,
PDD_LOAD_SHAPE (step or burst; see loadgen/locust_shapes.py). gevent-safe:
no asyncio here, and workloads are plain synchronous objects. A trace workload's
timestamps are ignored: Locust's users set the pace.
"""

from __future__ import annotations

import csv
import logging
import os
import random
import time
from array import array

import gevent
from locust import FastHttpUser, constant, events, task
from locust.exception import StopUser

from loadgen.locust_shapes import selected_shape
from loadgen.plan import RequestPlan, Session
from loadgen.spec import parse_spec
from loadgen.sse import SseLineDecoder, StreamError, StreamTally, error_message
from loadgen.tokens import DEFAULT_VOCAB
from loadgen.workloads import build_workload

log = logging.getLogger(__name__)

ENDPOINT = "/v1/completions"
DEADLINE_S = float(os.environ.get("PDD_TIMEOUT_S", "300"))  # send to last byte, like the bench client
WORKLOAD_SPEC = os.environ.get("PDD_WORKLOAD", "agentic:context=8K,output=16..128,think=500ms")
_workload_config = parse_spec(WORKLOAD_SPEC)  # a bad spec stops Locust at start, with the reason
_shared: dict[str, object] = {}
_gaps_s = array("d")  # every inter-token gap of this process, for the ITL CSV
ITL_QUANTILES = (0.5, 0.9, 0.95, 0.99)

LoadShape = selected_shape()  # Locust picks this class up when PDD_LOAD_SHAPE is set
if LoadShape is None:
    del LoadShape


@events.test_start.add_listener
def _make_workload(environment, **_kwargs) -> None:
    # one workload per process, shared by its users: gevent never switches inside a plan call
    _shared["workload"] = build_workload(_workload_config, random.Random(int(os.environ.get("PDD_SEED", "0"))))


@events.quitting.add_listener
def _write_itl_csv(environment, **_kwargs) -> None:
    prefix = getattr(getattr(environment, "parsed_options", None), "csv_prefix", None)
    if prefix:
        write_itl_csv(f"{prefix}_itl.csv", _gaps_s)


def write_itl_csv(path: str, gaps_s) -> None:
    ordered = sorted(gaps_s)
    row = {"Name": ENDPOINT, "Gap Count": len(ordered),
           "Average (ms)": 1000.0 * sum(ordered) / len(ordered) if ordered else 0.0}
    for q in ITL_QUANTILES:
        row[f"p{q * 100:g} (ms)"] = 1000.0 * ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0
    row["Max (ms)"] = 1000.0 * ordered[-1] if ordered else 0.0
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)


def shared_workload():
    if "workload" not in _shared:
        _make_workload(None)
    return _shared["workload"]


class CompletionUser(FastHttpUser):
    wait_time = constant(0)
    network_timeout = DEADLINE_S
    connection_timeout = 30.0

    def on_start(self) -> None:
        self.model = os.environ.get("PDD_MODEL") or self._first_model()
        self.session: Session | None = None
        self.plan: RequestPlan | None = None
        self.vocab = getattr(_workload_config, "vocab", DEFAULT_VOCAB)

    def _first_model(self) -> str:
        with self.client.get("/v1/models", name="/v1/models", catch_response=True) as response:
            try:
                return str(response.json()["data"][0]["id"])
            except (ValueError, KeyError, IndexError, TypeError):
                response.failure("GET /v1/models listed no model; set PDD_MODEL")
                raise StopUser() from None

    @task
    def next_request(self) -> None:
        if self.plan is None or self.session is None:
            self.session = shared_workload().new_session(joining=self.session is None)
            if self.session is None:
                raise StopUser()  # the workload has no more sessions
            self.plan = self.session.first_request()
        elif self.plan.think_s > 0:
            gevent.sleep(self.plan.think_s)
        plan, session = self.plan, self.session
        tally = self._stream(plan)
        if tally is None:
            session.abandon()
            self.plan = None
        else:
            self.plan = session.next_turn(plan.prompt, tally.output_ids)

    def _stream(self, plan: RequestPlan) -> StreamTally | None:
        payload = {"model": self.model, "prompt": plan.prompt, "max_tokens": plan.max_tokens, "stream": True,
                   "stream_options": {"include_usage": True}}
        headers = {"x-request-id": plan.request_id, "Accept": "text/event-stream", "Accept-Encoding": "identity"}
        tally = StreamTally(sent_at=time.perf_counter(), vocab=self.vocab)
        error: Exception | None = None
        with self.client.post(ENDPOINT, json=payload, headers=headers, stream=True, catch_response=True,
                              name=ENDPOINT) as response:
            try:
                if response.status_code == 0:  # no HTTP answer at all: Locust hands back an ErrorResponse
                    raise StreamError(f"connection: {getattr(response, 'error', None)}")
                if response.status_code >= 400:
                    raise StreamError(f"HTTP {response.status_code}: {error_message(_json_or_text(response))}")
                remaining = DEADLINE_S - (time.perf_counter() - tally.sent_at)
                with gevent.Timeout(max(remaining, 0.001), StreamError(f"no complete answer within {DEADLINE_S:g}s")):
                    _read_events(response, tally)
                tally.check_complete()
                response.success()
            except (StreamError, OSError) as caught:
                error = caught
                response.failure(str(caught))
                log.warning("%s failed: %s", plan.request_id, caught)  # Locust's table groups by error, not request
        self._fire(tally, plan, error)
        return None if error else tally

    def _fire(self, tally: StreamTally, plan: RequestPlan, error: Exception | None) -> None:
        def fire(kind: str, seconds: float | None, exception: Exception | None = None) -> None:
            if seconds is not None:
                self.environment.events.request.fire(
                    request_type=kind, name=ENDPOINT, response_time=seconds * 1000.0,
                    response_length=len(tally.token_times), exception=exception,
                    context={"request_id": plan.request_id, "session": plan.session},
                )
        fire("TTFT", tally.ttft_s)
        if error is None:
            fire("TPOT", tally.tpot_s)
            _gaps_s.extend(tally.itl_s)
            fire("ITL", max(tally.itl_s, default=None))
        fire("E2E", tally.e2e_s if error is None else time.perf_counter() - tally.sent_at, error)


def _read_events(response, tally: StreamTally) -> None:
    # the public readline() splits on CRLF only; SSE events may end in a bare LF
    raw = response._response
    decoder = SseLineDecoder()
    try:
        while not tally.done:
            line = raw.readline(b"\n")
            if not line:
                return
            data = decoder.feed(line.decode("utf-8", errors="replace"))
            if data is not None:
                tally.feed_event(data, time.perf_counter())
    finally:
        raw.release()  # a stream left unread (error, deadline) closes its connection instead of reusing it


def _json_or_text(response) -> object:
    try:
        return response.json()
    except ValueError:
        return response.text
