"""The vocabulary of pdd-emu: roles, modes, pipelines and the few shared types.

Every module that speaks of a role, a mode or a pipeline imports it from here,
so the words mean one thing across the router, the engines and the reports.
"""

from __future__ import annotations

import enum
import time
from typing import Callable, NewType

RequestId = NewType("RequestId", str)
TokenId = int
Seconds = float


class Role(str, enum.Enum):
    ROUTER = "router"
    PREFILL = "prefill"
    DECODE = "decode"  # the PD baselines' decode pool (same code as main decode)
    RELAY_DECODE = "relay-decode"
    MAIN_DECODE = "main-decode"
    COLOCATED = "colocated"  # one pool that prefills and decodes


class Mode(str, enum.Enum):
    COLOCATED = "colocated"
    PD_INTRA = "pd-intra"
    PD_CROSS = "pd-cross"
    PDD = "pdd"
    PDD_KVSHIP = "pdd-kvship"


class Pipeline(str, enum.Enum):
    COLOCATED = "colocated"
    P_D = "P-D"
    P_MD = "P-MD"
    P_RLD_MD = "P-RLD-MD"
    P_RLD = "P-RLD"  # only ever the singular early finish, never chosen by policy


class HandoffMode(str, enum.Enum):
    ONE_SHOT = "one-shot"
    CATCH_UP = "catch-up"


class LaunchStyle(str, enum.Enum):
    """How a step's kernels are launched; the clock's fixed costs depend on it."""

    EAGER = "eager"  # prefill and extend steps
    CUDA_GRAPH = "cuda-graph"  # decode-only steps, as serving engines replay them


class Degraded(str, enum.Enum):
    """How a request was served while part of the mesh was down (services/router/degraded.py)."""
    MAIN_DECODE_DOWN = "main-decode-down"  # the relay served it whole (P-RLD)
    PREFILL_DOWN = "prefill-down"  # another prefill pool took it
    RELAY_TRANSFER_LATE = "relay-transfer-deadline"  # main decode decoded it whole
    NO_PREFILL = "prefill-unreachable"  # no prefill pool answered: the decode pool prefilled it itself
    MAIN_PATH_FAILED = "main-decode-failed"  # main decode or its WAN transfer failed before token 0: the relay served it


def unix_time() -> Seconds:
    """The default clock of the role cores: `time.time()` read at each call, so a clock that replaces
    it (the simulator's virtual one, services/simulate/clock.py) is the one the cores see."""
    return time.time()


Clock = Callable[[], Seconds]  # unix seconds now


class ErrorKind(str, enum.Enum):
    """Why a role refused or failed a call; each adapter maps it to its wire's status (gRPC's, HTTP's)."""
    INVALID = "invalid"  # the call itself is wrong: no prompt, an unknown instance or link
    PRECONDITION = "precondition"  # the caller must act first: send the prompt again, a receiver refused
    UNAVAILABLE = "unavailable"  # draining, a transfer or a peer failed: another try may succeed
    EXHAUSTED = "exhausted"  # no room in the engine
    NOT_FOUND = "not_found"  # the request is not known here (not relayed)
    DEADLINE = "deadline"  # the role waited too long for its own work
    CANCELLED = "cancelled"  # the call was cancelled under the role (its caller or its process went away)
    FAILED = "failed"  # none of the above: a defect, or a wire status no other kind names


class RoleError(Exception):
    """A role's failure of one call, in the role's words: `kind` and a message a person can act on.

    `code`: the name of the wire status a peer answered with (gRPC's, e.g. "UNAVAILABLE"), which the
    router's API reports as the error's code; None where the failure arose on the caller's own side.
    """

    def __init__(self, kind: ErrorKind, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.code = kind, message, code


class MissingExtra(ImportError):
    """A tool beyond `make run` whose optional dependency (a pyproject extra) is not installed."""

    def __init__(self, tool: str, package: str, extra: str) -> None:
        super().__init__(f"{tool} needs {package}, which is not installed: pip install 'pdd-emu[{extra}]' "
                         "(make venv installs every extra)")
