"""Ship KV to another service: the bytes over the link between the pools, the figures with the last frame.

Used by prefill (the prompt's KV, to decode, main decode and the relay) and by
the relay in pdd-kvship (the incremental KV of its tokens, to main decode).
One sender (connection pool) and one gRPC channel per destination, created on
first use and closed at shutdown; each transfer's bytes flow in a tracked task.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, replace
from typing import Callable, Protocol

import grpc

from services.kv.frames import Completion
from services.kv.sender import KvSender, SendResult
from services.kv.stream import KvProgress, TransferExtent, streamed_parts
from services.profiles import load_model
from services.scenario.plan import LinkPlan, MeshPlan
from services.rpc import channel, metadata, pb, pb_grpc

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Shipment:
    target: str
    tokens: int
    emulated_bytes: int
    real_bytes: int
    transfer_id: str = ""
    cancel: asyncio.Event | None = None


class Sender(Protocol):
    """Moves one transfer's frames to a destination: KvSender over sockets, or a simulated link."""

    transfers: int
    failures: int

    async def send(self, request_id: str, real_bytes: int, cancel: asyncio.Event | None = None,
                   seqs: range | None = None, completion: Completion | None = None) -> SendResult: ...

    async def close(self) -> None: ...


class KvRoutes(Protocol):
    """How a shipper reaches a destination: its Decode stub (the announce) and a sender for its bytes."""

    def stub(self, target: str) -> pb_grpc.DecodeStub: ...

    def sender(self, link: LinkPlan, on_lost: Callable[[list[str]], None]) -> Sender: ...

    async def close(self) -> None: ...


class SocketRoutes:
    """The mesh's routes: a gRPC channel to the destination, a connection pool through the planned link."""

    def __init__(self, plan: MeshPlan, me: str) -> None:
        self.plan, self.me = plan, me
        self._channels: list[grpc.aio.Channel] = []

    def stub(self, target: str) -> pb_grpc.DecodeStub:
        ch = channel(self.plan.grpc_address(target, self.me))
        self._channels.append(ch)
        return pb_grpc.DecodeStub(ch)

    def sender(self, link: LinkPlan, on_lost: Callable[[list[str]], None]) -> KvSender:
        return KvSender(link.host, link.listen_port, on_lost=on_lost)

    async def close(self) -> None:
        await asyncio.gather(*(ch.close() for ch in self._channels))


class KvShipper:
    def __init__(self, plan: MeshPlan, me: str, routes: KvRoutes | None = None) -> None:
        self.plan, self.me = plan, me
        self.routes = routes or SocketRoutes(plan, me)
        # Constants of the scenario, read here rather than sent with every request.
        self.kv_bytes_per_token = load_model(plan.scenario.model).kv_bytes_per_token
        self.byte_scale = plan.scenario.byte_scale
        self._senders: dict[str, Sender] = {}
        self._stubs: dict[str, pb_grpc.DecodeStub] = {}
        self._tasks: set[asyncio.Task] = set()
        self._cancels: dict[str, asyncio.Event] = {}
        self.real_bytes_sent = 0
        self.cancelled = 0
        self._closing = False

    def _route(self, target: str) -> tuple[Sender, pb_grpc.DecodeStub]:
        """KeyError when the plan has no link from this service to `target`."""
        if target not in self._senders:
            link = self.plan.link(self.me, target)
            stub = self._stubs[target] = self.routes.stub(target)
            self._senders[target] = self.routes.sender(link, lambda ids: self._report_lost(stub, ids))
        return self._senders[target], self._stubs[target]

    async def ship(self, transfer_id: str, target: str, tokens: int, first_index: int = 0,
                   cancellable: bool = False, progress: KvProgress | None = None,
                   done: Completion | None = None) -> Shipment:
        """Send `tokens` tokens of KV to `target`: their real bytes (emulated / byte_scale), the last frame
        with the transfer's Completion (its figures and the first token), so no announce goes first.

        With `progress` (streamed KV) the first token is not known yet: the bytes follow the prompt's
        computed tokens, and the last frame leaves with the first token once progress finishes
        (services/kv/stream.py). Without it the transfer follows prefill's end: `done` names the first
        token and when prefill ended, which the transfer's time counts from (docs/mesh.md §Transfer
        time); no `done` is a transfer without a first token (a relay's KV), timed from now.
        """
        sender, stub = self._route(target)
        emulated = tokens * self.kv_bytes_per_token
        real = math.ceil(emulated / max(1.0, self.byte_scale))
        extent = TransferExtent(first_index, tokens, real)
        if progress is None and done is None:
            done = Completion(-1, time.time())
        cancel = asyncio.Event()
        if cancellable:
            self._cancels[transfer_id] = cancel
        task = asyncio.create_task(self._send(sender, stub, transfer_id, extent, emulated, progress, done, cancel),
                                   name=f"kv-{transfer_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return Shipment(target, tokens, emulated, real, transfer_id, cancel)

    async def abandon(self, shipment: Shipment, reason: str) -> None:
        """Stop a transfer whose prefill failed and tell its receiver, which fails it now."""
        shipment.cancel.set()
        await self._abort(self._route(shipment.target)[1], shipment.transfer_id, reason)

    async def _send(self, sender: Sender, stub: pb_grpc.DecodeStub, transfer_id: str, extent: TransferExtent,
                    emulated: int, progress: KvProgress | None, done: Completion | None,
                    cancel: asyncio.Event) -> None:
        sent = 0
        try:
            async for seqs, completion in streamed_parts(extent, progress, done):
                if completion is not None:  # the last frame: the transfer's figures go with it
                    completion = replace(completion, num_tokens=extent.tokens, emulated_bytes=emulated,
                                         real_bytes=extent.real)
                result = await sender.send(transfer_id, extent.real, cancel, seqs=seqs, completion=completion)
                sent += result.real_bytes
                self.real_bytes_sent += result.real_bytes
                if result.cancelled:  # the senders check `cancel` before each frame
                    self.cancelled += 1
                    log.info("%s: transfer cancelled after %d of %d bytes", transfer_id, sent, extent.real)
                    break
        except ConnectionError as exc:
            log.warning("%s", exc)
            await self._abort(stub, transfer_id, f"the sender's link connection broke ({exc.__cause__ or exc})")
        finally:
            if self._cancels.get(transfer_id) is cancel:  # the same id may have a second, uncancellable path
                del self._cancels[transfer_id]

    def _report_lost(self, stub: pb_grpc.DecodeStub, transfer_ids: list[str]) -> None:
        """A connection broke after carrying these: a receiver still waiting for one will never get it."""
        if self._closing:
            return
        for transfer_id in transfer_ids:
            task = asyncio.create_task(self._abort(stub, transfer_id, "its link connection broke before delivery"))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _abort(self, stub: pb_grpc.DecodeStub, transfer_id: str, reason: str) -> None:
        """Tell the receiver its bytes will not come, so the request fails now rather than at its deadline."""
        try:
            await stub.Announce(pb.TransferAnnounce(request_id=transfer_id, abort_reason=reason), timeout=5.0,
                                metadata=metadata(transfer_id))
        except grpc.aio.AioRpcError as exc:
            # The receiver is unreachable too; its transfer deadline still ends the wait.
            log.warning("%s: could not report the failed transfer: %s", transfer_id, exc.code().name)

    def cancel(self, transfer_id: str) -> bool:
        """Stop sending a transfer's remaining frames; False when it is not in flight."""
        event = self._cancels.get(transfer_id)
        if event is None:
            return False
        event.set()
        return True

    def stats(self) -> dict:
        return {"kv_bytes_sent": self.real_bytes_sent, "transfers_in_flight": len(self._tasks),
                "transfers_cancelled": self.cancelled,
                "senders": {t: {"transfers": s.transfers, "failures": s.failures} for t, s in self._senders.items()}}

    async def close(self) -> None:
        self._closing = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for sender in self._senders.values():
            await sender.close()
        await self.routes.close()
