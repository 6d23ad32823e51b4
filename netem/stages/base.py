"""The one interface every impairment implements: a stage moves a chunk's deadline.

As in Toxiproxy's `Pipe`, each impairment is a small object in a chain. Data is
stamped when it enters the link (`entry`) and every stage computes from that
stamp, never from "now", so time spent queueing in one stage is not counted
again by the next (docs/netem.md, "Delay line").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from netem.config import DirectionConfig


@dataclass(slots=True)
class Chunk:
    """A slice of one stream in flight. `data` None marks the end of the stream (a FIN)."""

    data: memoryview | None
    size: int
    entry: float  # loop time when the bytes were read from the sender
    deadline: float  # loop time when they may be written to the receiver; stages only raise it


class Stage(Protocol):
    def configure(self, config: DirectionConfig, rtt: float) -> None:
        """Take new parameters; chunks already stamped keep their deadlines."""

    def pipe(self, chunk: Chunk) -> None:
        """Raise chunk.deadline by what this impairment costs."""


def run_stages(stages: tuple[Stage, ...], chunk: Chunk) -> Chunk:
    for stage in stages:
        stage.pipe(chunk)
    return chunk
