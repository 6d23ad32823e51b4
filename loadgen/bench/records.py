"""One line of requests.jsonl: what the client saw of one request."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Literal

Status = Literal["ok", "error", "timeout", "cancelled"]


@dataclass
class RequestRecord:
    id: str
    session: str | None
    turn: int
    send_s: float  # seconds since the run started (monotonic clock)
    send_unix: float  # wall clock, to line up with the server's pdd.timeline stamps
    prompt_tokens: int
    max_tokens: int
    hit_rate: float  # expected prefix hit from token-id overlap with what was sent before
    target_hit_rate: float | None = None
    status: Status = "ok"
    error: str | None = None
    http_status: int | None = None
    output_tokens: int = 0
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    elapsed_s: float | None = None  # send to the end of the attempt, whatever its status
    itl_s: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict | None = None
    pdd: dict | None = None

    @classmethod
    def sent(cls, plan, send_s: float) -> RequestRecord:
        """The record of a RequestPlan sent now, `send_s` into the run; the outcome is filled in later."""
        return cls(id=plan.request_id, session=plan.session, turn=plan.turn, send_s=send_s, send_unix=time.time(),
                   prompt_tokens=plan.prompt_tokens, max_tokens=plan.max_tokens, hit_rate=plan.hit_rate,
                   target_hit_rate=plan.target_hit_rate)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def row(self) -> dict:
        """The record as a dict for summaries: its fields themselves, not the deep copy `asdict` makes."""
        return dict(vars(self))

    def to_json_line(self) -> str:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))


def read_records(path) -> list[dict]:
    """The records of a requests.jsonl file as dicts (the form reports work on)."""
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]
