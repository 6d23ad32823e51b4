"""A call that outlives its deadline: the peer is asked whether it is alive (docs/reliability.md §Hangs).

Part of the Peers adapter (services/router/peers.py). A call waits its deadline (sized to its work,
services/router/deadlines.py); then the peer's Health decides. A peer that answers is busy and the
call waits another deadline; one that does not is hung: the call is cancelled and fails as
UNAVAILABLE, the status a crashed peer's calls fail with, so the request takes the same degraded
path (another pool, or the decode pool prefilling itself). Every other call still open to that peer
fails at the same moment, and until the peer answers again each new call first asks its Health, so
a hang costs a request at most one deadline and one Health check, however many are waiting.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import grpc

from services.rpc.errors import role_error
from services.types import ErrorKind, RoleError


class HangGuard:
    """The peers found hung, and the wait of one call on a peer that may be."""

    def __init__(self, answers: Callable[[str], Awaitable[bool]], allowance_s: float) -> None:
        self.answers, self.allowance_s = answers, allowance_s  # answers(peer): its Health within allowance_s
        self._hung: dict[str, asyncio.Event] = {}

    def suspected(self, peer: str) -> bool:
        event = self._hung.get(peer)
        return event is not None and event.is_set()

    async def reply(self, peer: str, method: str, call: Any, deadline_s: Callable[[], float]) -> Any:
        """`call`'s reply (its failure as a RoleError), or RoleError UNAVAILABLE once `peer` is found hung.

        `deadline_s()` is read at each wait: the work outstanding at the peer changes meanwhile.
        """
        reply = asyncio.ensure_future(_answer(call))
        hung = self._hung.setdefault(peer, asyncio.Event())
        found = asyncio.ensure_future(hung.wait())
        try:
            if hung.is_set():  # found hung by an earlier call: this one waits for no deadline of its own
                if not await self.answers(peer):
                    return self._failed(peer, method, reply, "found hung by an earlier call and still silent")
                self._hung.pop(peer, None)  # it answers again
                found.cancel()
                found = asyncio.ensure_future(asyncio.Event().wait())
            while True:
                wait_s = deadline_s()
                done, _ = await asyncio.wait((reply, found), timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
                if reply in done:
                    return reply.result()
                if found in done:
                    return self._failed(peer, method, reply, "found hung by another call")
                if not await self.answers(peer):
                    hung.set()  # every other call open to it fails now too
                    return self._failed(peer, method, reply, f"no answer within its {wait_s:.2f} s deadline, "
                                                             f"nor its Health within {self.allowance_s:g} s")
        finally:
            found.cancel()
            if not reply.done():
                reply.cancel()
                getattr(call, "cancel", lambda: None)()  # a simulation's call is a bare coroutine
            reply.add_done_callback(_retrieved)  # its failure, if nobody awaits it now, is not an unseen error

    @staticmethod
    def _failed(peer: str, method: str, reply: asyncio.Future, why: str) -> Any:
        if reply.done():  # it answered, or failed, while its Health was asked
            return reply.result()
        raise RoleError(ErrorKind.UNAVAILABLE, f"{peer} hung: its {method} had {why}", "DEADLINE_EXCEEDED")


async def _answer(call):
    """A unary call's reply, its failure as the RoleError of its status (services/rpc/errors.py)."""
    try:
        return await call
    except grpc.aio.AioRpcError as exc:
        raise role_error(exc) from exc


def _retrieved(reply: asyncio.Future) -> None:
    if not reply.cancelled():
        reply.exception()
