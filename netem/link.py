"""The userspace link: listen on one address, forward to an upstream, shape both ways.

    async with UserspaceLink(("127.0.0.1", 0), ("127.0.0.1", 9000), LinkConfig.symmetric(delay="20ms")) as link:
        host, port = link.listen_address
        link.reconfigure({"up": {"rate": "1gbit"}})

Everything runs on the event loop that started the link; no threads, no locks.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from typing import Any, Coroutine, Literal, Mapping

from netem.config import DIRECTIONS, ConfigError, Direction, LinkConfig
from netem.connection import LOOPBACK_SEGMENT, Connection, announced_segment, shaped_rcvbuf
from netem.direction import DirectionState
from netem.hangups import HangupWatch
from netem.schedule import Schedule
from netem.scheduler import ScheduleRunner
from netem.stages.partition import PartitionMode
from netem.timers import PreciseTimers

Address = tuple[str, int]
CLOSE_TIMEOUT_S = 5.0
SO_BUF_LOCK = getattr(socket, "SO_BUF_LOCK", 72)  # linux/asm-generic/socket.h; this Python's socket module lacks it
Sides = Literal["up", "down", "both"]


def _kernel_default(sock: socket.socket, level: int, option: int) -> None:
    """`option` back to 0, the kernel's own (no segment clamp, no buffer lock), where the kernel has it."""
    try:
        sock.setsockopt(level, option, 0)
    except OSError:
        pass


def _sides(direction: Sides) -> tuple[Direction, ...]:
    if direction == "both":
        return DIRECTIONS
    if direction in DIRECTIONS:
        return (direction,)
    raise ConfigError(f"unknown direction {direction!r}; use up, down or both")


class UserspaceLink:
    def __init__(
        self,
        listen: Address,
        upstream: Address,
        config: LinkConfig | None = None,
        seed: int | random.Random | None = None,
    ) -> None:
        self.listen = listen
        self.upstream = upstream
        self._config = config or LinkConfig()
        self._rng = seed if isinstance(seed, random.Random) else random.Random(seed)
        self._directions: dict[Direction, DirectionState] = {
            side: DirectionState(side, getattr(self._config, side), self._config.rtt(side), random.Random(self._rng.getrandbits(64)))
            for side in DIRECTIONS
        }
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[Connection] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.timers: PreciseTimers | None = None
        self.hangups: HangupWatch | None = None  # sockets only: a VirtualLink has none
        self.listen_address: Address | None = None
        self.schedule: ScheduleRunner | None = None

    # -- lifecycle -------------------------------------------------------
    async def start(self) -> UserspaceLink:
        self._loop = asyncio.get_running_loop()
        self.timers = PreciseTimers(self._loop)
        self.hangups = HangupWatch(self._loop)
        for state in self._directions.values():
            state.bind(self._loop.time, self.timers)
        host, port = self.listen
        self._server = await self._loop.create_server(lambda: Connection(self).client, host, port, reuse_address=True)
        self._shape_listener()
        bound = self._server.sockets[0].getsockname()
        self.listen_address = (bound[0], bound[1])
        return self

    async def stop(self) -> None:
        await self.stop_schedule()
        if self._server is not None:
            self._server.close()
        conns = list(self._connections)
        for conn in conns:
            conn.close(reset=True)
        if conns:
            await asyncio.wait_for(asyncio.gather(*(c.wait_closed() for c in conns)), CLOSE_TIMEOUT_S)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        for state in self._directions.values():
            state.close()
        if self.timers is not None:
            self.timers.close()
        if self.hangups is not None:
            self.hangups.close()

    async def __aenter__(self) -> UserspaceLink:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- used by connections ---------------------------------------------
    def direction(self, side: Direction) -> DirectionState:
        return self._directions[side]

    def connection_rng(self, side: Direction) -> random.Random:
        return random.Random(self._directions[side].rng.getrandbits(64))

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def register(self, conn: Connection) -> None:
        self._connections.add(conn)

    def forget(self, conn: Connection) -> None:
        self._connections.discard(conn)

    def rejecting(self) -> bool:
        now = self._now()
        return any(d.partition.active(now) == "reject" for d in self._directions.values())

    def _now(self) -> float:
        return self._loop.time() if self._loop else time.monotonic()  # the clock loop.time() reads

    # -- control ---------------------------------------------------------
    @property
    def config(self) -> LinkConfig:
        return self._config

    def reconfigure(self, change: LinkConfig | Mapping[str, Any]) -> LinkConfig:
        """Apply a LinkConfig or a patch {"up"|"down"|"both": {field: value}}; raises ConfigError.

        Chunks already stamped keep their deadlines, so no byte in flight is
        dropped or reordered; new bytes see the new parameters.
        """
        new = change if isinstance(change, LinkConfig) else self._config.patched(change)
        self._config = new
        for side in DIRECTIONS:
            self._directions[side].configure(getattr(new, side), new.rtt(side))
        self._shape_listener()
        return new

    def _shape_listener(self) -> None:
        """Give the listener what its next connections inherit from the up direction's config.

        A client may write as soon as its handshake ends, before the loop accepts it, so the segment
        and receive buffer must be the listener's: an accepted socket's buffer shrunk under a window
        already announced drops segments, and the client waits out a 200 ms retransmission (docs/netem.md
        §Serialization and backpressure). Unshaped, its connections get the kernel's own again: no
        segment clamp, and the buffer unlocked to autotune (SO_BUF_LOCK, Linux 5.14; an older kernel
        keeps the last shaped buffer for new connections).
        """
        if self._server is None:
            return
        up = self._config.up
        segment = announced_segment(up)
        for sock in self._server.sockets:
            if segment is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, segment)
            else:
                _kernel_default(sock, socket.IPPROTO_TCP, socket.TCP_MAXSEG)  # the route's own segment
            if up.rate_bps:
                size = shaped_rcvbuf(up.queue_bytes, sock, segment or LOOPBACK_SEGMENT)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
            else:
                _kernel_default(sock, socket.SOL_SOCKET, SO_BUF_LOCK)  # buffers that autotune

    def partition(self, mode: PartitionMode, direction: Sides = "both", duration: float | None = None) -> None:
        """Blackhole (hold bytes) or reject (reset connections) for `duration` seconds, or until healed."""
        if mode not in ("blackhole", "reject"):
            raise ConfigError(f"unknown partition mode {mode!r}; use blackhole or reject")
        if duration is not None and duration < 0:
            raise ConfigError("a partition duration cannot be negative")
        now = self._now()
        for side in _sides(direction):
            self._directions[side].start_partition(mode, now, duration)
        if mode == "reject":
            self.reset_connections()

    def heal(self, direction: Sides = "both") -> None:
        for side in _sides(direction):
            self._directions[side].heal()

    def reset_connections(self) -> int:
        """Reset every open connection (RST to both ends); returns how many."""
        conns = list(self._connections)
        for conn in conns:
            conn.reset()
        return len(conns)

    def stats(self) -> dict[str, dict[str, Any]]:
        now = self._now()
        return {side: self._directions[side].stats(now) for side in DIRECTIONS}

    # -- schedules -------------------------------------------------------
    async def run_schedule(self, schedule: Schedule) -> ScheduleRunner:
        """Start playing `schedule`, replacing any schedule already running."""
        await self.stop_schedule()
        self.schedule = ScheduleRunner(self, schedule).start()
        return self.schedule

    async def stop_schedule(self) -> bool:
        """Stop the running schedule; the link keeps its current settings. False if none ran."""
        runner, self.schedule = self.schedule, None
        if runner is None:
            return False
        await runner.stop()
        return True
