"""Kill -9 and restart of one service of the in-process mesh, as its keeper does it in `pdd-emu up`.

A killed process takes everything it was doing with it: the handlers it was
running, the streams it was producing, its engines' batches, its KV transfers
and its caches. Its peers see it as gRPC reports a dead server: calls in
flight and new calls end with UNAVAILABLE, its streams break, its KV
connections reset. The keeper starts the same command again: a fresh process
with empty caches (docs/reliability.md, "kill -9").

`OutageMesh` models that in one process. Every task started on behalf of a
service carries its name in the context variable `SERVING`: a call into a
service (`LiveStub`) runs the servicer in a task of that context, and the
tasks a handler starts inherit it. The loop's task factory files each task
under its service, so `kill` cancels exactly that process's work and nothing
else. `restart` builds the service anew (`SimulatedMesh.build_service`); the
stubs and the KV receiver tables others hold look the service up by name on
every use, so they reach the new process (docs/campaigns.md, "Faults in virtual time").
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections import defaultdict
from typing import Any, AsyncIterator

import grpc

from services.scenario.plan import MeshPlan
from services.simulate.feedport import Deliver, PushedFeed
from services.simulate.inproc import STREAMING, InprocRpcError, InprocStub, StreamCall
from services.simulate.wiring import SimulatedMesh

SERVING: contextvars.ContextVar[str | None] = contextvars.ContextVar("serving", default=None)


def serving(name: str) -> contextvars.Context:
    """A context whose tasks run on behalf of service `name`."""
    context = contextvars.copy_context()
    context.run(SERVING.set, name)
    return context


def unavailable(name: str) -> InprocRpcError:
    return InprocRpcError(grpc.StatusCode.UNAVAILABLE, f"failed to connect to {name}: connection refused")


async def _refused(name: str) -> AsyncIterator[Any]:
    raise unavailable(name)
    yield  # makes this an async generator: the stream's first read raises


class _CurrentTable:
    """The receiving service's TransferTable as it is now: a restarted receiver has a fresh one."""

    def __init__(self, mesh: OutageMesh, name: str) -> None:
        self._mesh, self._name = mesh, name

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._mesh.servicers[self._name].transfers, attr)


class LiveStub:
    """`caller`'s stub of `target` through kills and restarts: the servicer and its channel looked up per call."""

    def __init__(self, mesh: OutageMesh, target: str, caller: str) -> None:
        self._mesh, self._target, self._caller = mesh, target, caller
        self._wire: Any = None

    def _stub(self) -> InprocStub:
        mesh, route = self._mesh, self._mesh.control_route(self._target, self._caller)
        if route is not None and (self._wire is None or self._wire.closed):
            self._wire = mesh.links[route.name].connect()  # a channel reconnects after a reset
        return InprocStub(mesh.servicers[self._target], self._caller, self._wire)

    def _check_caller(self) -> None:
        if self._caller in self._mesh.down:  # a killed process runs no more code, so makes no more calls
            raise asyncio.CancelledError()

    def open_tokens(self, request: Any, deliver: Deliver) -> PushedFeed | str:
        """The pushed feed, its service's side run on the service's behalf; why not, if it is down."""
        self._check_caller()
        if self._target in self._mesh.down:
            return unavailable(self._target).details()
        return serving(self._target).run(self._stub().open_tokens, request, deliver)

    def __getattr__(self, method: str):
        mesh, target = self._mesh, self._target
        if method in STREAMING:
            def stream(request, metadata=None, timeout=None, wait_for_ready=None) -> StreamCall:
                self._check_caller()
                if target in mesh.down:
                    return StreamCall(_refused(target))
                handler = getattr(self._stub(), method)
                call = serving(target).run(handler, request, metadata, timeout)  # its task runs for target
                mesh.streams[self._caller].add(call)
                return call
            return stream

        async def unary(request, timeout=None, metadata=None, wait_for_ready=None):
            self._check_caller()
            if target in mesh.down:
                raise unavailable(target)
            handler = getattr(self._stub(), method)
            task = asyncio.get_running_loop().create_task(handler(request, timeout=timeout, metadata=metadata),
                                                          context=serving(target))
            try:
                return await task
            except asyncio.CancelledError:
                if task.cancelled() and not asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise unavailable(target) from None  # the server died under the call
                raise
        return unary


class OutageMesh(SimulatedMesh):
    """A SimulatedMesh whose services can be killed and restarted (see the module doc)."""

    def __init__(self, plan: MeshPlan) -> None:
        self.down: set[str] = set()
        self.tasks: dict[str, set[asyncio.Task]] = defaultdict(set)
        self.streams: dict[str, weakref.WeakSet[StreamCall]] = defaultdict(weakref.WeakSet)  # by caller
        self.kills = 0
        super().__init__(plan)

    def _file_task(self, loop: asyncio.AbstractEventLoop, coro: Any, context: contextvars.Context | None = None):
        task = asyncio.Task(coro, loop=loop, context=context)
        name = context.get(SERVING) if context is not None else SERVING.get()
        if name is not None:
            if name in self.down:
                task.cancel()  # a dead process starts nothing, not even from a finally clause
            tasks = self.tasks[name]
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        return task

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if loop.get_task_factory() is not None:
            raise RuntimeError("OutageMesh files tasks through the loop's task factory; this loop has one already")
        loop.set_task_factory(self._file_task)
        await super().start()

    async def start_service(self, name: str) -> None:
        await asyncio.get_running_loop().create_task(super().start_service(name), context=serving(name))

    def transfers(self, name: str) -> Any:
        return _CurrentTable(self, name)

    def stub(self, target: str, caller: str) -> Any:
        return LiveStub(self, target, caller)

    def kill(self, name: str) -> None:
        """kill -9 of `name`: its work stops now, its peers' calls to it fail, its connections reset."""
        if name in self.down:
            raise RuntimeError(f"{name} is down already")
        self.down.add(name)
        self.kills += 1
        for call in list(self.streams.pop(name, ())):
            call.cancel()  # the streams it was reading: the servers see their client hang up
        for task in list(self.tasks.pop(name, ())):
            task.cancel()
        for link in self.plan.links:
            if name in (link.src, link.dst):
                self.links[link.name].reset_connections()

    async def restart(self, name: str) -> None:
        """The keeper's restart: a fresh process of `name`, serving from now on."""
        if name not in self.down:
            raise RuntimeError(f"{name} is not down")
        self.down.discard(name)
        serving(name).run(self.build_service, name)  # whatever its constructors start runs for it
        await self.start_service(name)

    async def stop(self) -> None:
        for name in sorted(self.down):
            await self.restart(name)  # what stop() closes is a running process
        await super().stop()
        asyncio.get_running_loop().set_task_factory(None)
