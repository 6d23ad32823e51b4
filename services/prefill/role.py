"""The prefill core: compute a prompt, produce its first token, ship its KV to the receivers.

Prefill computes the prompt (its own prefix cache saves the hit part), produces
the first output token, announces the transfer to each receiver and sends the
KV of the tokens that receiver lacks as real bytes over the link between the
pools (docs/mesh.md §Request flow). With `kv_streaming` (the default) the
announce comes first and each chunk's KV leaves as the step that computed it
ends; the last frame brings the first token (docs/engine.md, "Streamed KV").
In PDD both transfers leave at once (dual-path send): the relay's over RDMA,
main decode's over the WAN. The call returns once the receivers have
acknowledged the announces and prefill produced the first token; the bytes flow
in tracked tasks, and the WAN transfer can be cancelled when the relay finished
the request.

No I/O here: the KV shipper reaches the receivers, the clock is an argument, and
failures are RoleErrors. It implements services/roles.py PrefillPeer; its gRPC
adapter is services/prefill/server.py. Its data are the protocol's messages.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from services.engine.sequence import Sequence
from services.kv.frames import Completion
from services.kv.stream import KvProgress
from services.rpc.messages import pb
from services.types import Clock, ErrorKind, RoleError, unix_time

if TYPE_CHECKING:  # the process and the shipper come in as arguments; their I/O is not the core's
    from services.instances import RoleProcess
    from services.kv.shipper import KvShipper


class PrefillRole:
    def __init__(self, process: RoleProcess, shipper: KvShipper, clock: Clock = unix_time) -> None:
        self.process, self.shipper, self.clock = process, shipper, clock
        self.me = process.service

    async def prefill(self, request: pb.PrefillRequest) -> pb.PrefillReply:
        rid = request.request_id
        received = self.process.received(request)
        prompt, hashes = received.ids, received.hashes
        if not len(prompt):
            raise RoleError(ErrorKind.INVALID, "empty prompt")
        targets = [(request.kv_target, request.receiver_hit_tokens)]
        if request.kv_target_secondary:
            targets.append((request.kv_target_secondary, request.secondary_hit_tokens))
        for target, _ in targets:
            try:
                self.process.plan.link(self.me.name, target)
            except KeyError:
                raise RoleError(ErrorKind.INVALID, f"no link from {self.me.name} to {target!r}") from None
        engine = self.process.pool.choose(hashes).engine
        handle = self.process.submit(engine, Sequence(
            request_id=rid, context=prompt, prompt_len=len(prompt), kv_tokens=0, generate=1, first_position=0,
            seed=request.seed, block_hashes=hashes, fingerprint=received.fingerprint))
        if self.process.plan.scenario.kv_streaming:
            first_token, shipped = await self._prefill_streamed(rid, handle, targets, len(prompt))
        else:
            first_token = await self.process.first_token(handle)
            done = Completion(first_token, self.clock())  # both paths' transfers are timed from here
            shipped = [await self.shipper.ship(rid, target, max(0, len(prompt) - hit), first_index=hit,
                                               cancellable=index == 0, done=done)
                       for index, (target, hit) in enumerate(targets)]
        stats = handle.stats
        return pb.PrefillReply(request_id=rid, first_token=first_token, hit_tokens=stats.hit_tokens,
                               computed_tokens=stats.computed_tokens, prefill_done_unix=self.clock(),
                               queued_s=stats.queued_s or 0.0, kv_bytes_emulated=shipped[0].emulated_bytes,
                               kv_bytes_emulated_secondary=sum(s.emulated_bytes for s in shipped[1:]),
                               instance=self.process.instance_name(engine))

    async def _prefill_streamed(self, rid: str, handle, targets: list[tuple[str, int]], prompt_len: int):
        """Each chunk's KV as the step that computed it ends; the first token and the figures last.

        (first token, shipments). Should prefill fail, each receiver is told and its stream stops.
        """
        progress = KvProgress()
        follow = asyncio.create_task(self._follow(handle, progress), name=f"progress-{rid}")
        shipped = []
        try:
            for index, (target, hit) in enumerate(targets):
                shipped.append(await self.shipper.ship(rid, target, max(0, prompt_len - hit), first_index=hit,
                                                       cancellable=index == 0, progress=progress))
            first_token = await self.process.first_token(handle)
            progress.finish(Completion(first_token, self.clock()))  # the last frames leave with it
            return first_token, shipped
        except BaseException as exc:
            handle.cancel()
            for shipment in shipped:
                await asyncio.shield(self.shipper.abandon(shipment, f"prefill failed: {exc!r}"))
            raise
        finally:
            progress.end()
            follow.cancel()

    @staticmethod
    async def _follow(handle, progress: KvProgress) -> None:
        async for computed in handle.prefill_progress():
            progress.advance(computed)

    async def cache_lookup(self, request: pb.CacheLookupRequest) -> pb.CacheLookupReply:
        return self.process.cache_lookup(request)

    def cancel_transfer(self, request_id: str) -> bool:
        return self.shipper.cancel(request_id)
