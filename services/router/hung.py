"""A peer that stops answering: found hung, passed over at once, and watched until it answers again.

Part of the Peers adapter (services/router/peers.py; docs/hangs.md).
A call waits its deadline (sized to its work, services/router/deadlines.py); then the peer's Health
decides: a peer that answers is busy and the call waits another deadline; one that does not is
hung. The call is cancelled and fails as UNAVAILABLE, the status a crashed peer's calls fail with,
so the request takes the same degraded path (another pool, the relay, or the decode pool
prefilling itself). Every other call open to that peer fails at the same moment, and every new one
fails at once, without a call, until a watcher sees the peer answer its Health again (the peer woke
up, or its keeper restarted it). A lookup that misses its deadline has the watcher ask too, so a
hung decode pool costs each request at most one lookup's deadline until it is found.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

import grpc

from services.rpc.errors import role_error
from services.types import ErrorKind, RoleError

log = logging.getLogger(__name__)


class HangGuard:
    """The peers found hung, a watcher per hung peer, and the wait of one call on a peer that may be."""

    def __init__(self, answers: Callable[[str], Awaitable[bool]], allowance_s: float) -> None:
        self.answers, self.allowance_s = answers, allowance_s  # answers(peer): its Health within allowance_s
        self._hung: dict[str, asyncio.Event] = {}
        self._watchers: dict[str, asyncio.Task] = {}

    def suspected(self, peer: str) -> bool:
        event = self._hung.get(peer)
        return event is not None and event.is_set()

    def refuse_if_hung(self, peer: str, method: str) -> None:
        if self.suspected(peer):
            raise RoleError(ErrorKind.UNAVAILABLE, f"{peer} hung: it has not answered its Health since it was found "
                                                   f"silent; {method} not sent", "DEADLINE_EXCEEDED")

    def missed(self, peer: str) -> None:
        """A call to `peer` missed its deadline: the watcher asks its Health, and finds it hung if silent."""
        if peer not in self._watchers:
            self._watchers[peer] = asyncio.ensure_future(self._watch(peer, confirmed=False))

    async def reply(self, peer: str, method: str, call: Any, deadline_s: Callable[[], float]) -> Any:
        """`call`'s reply (its failure as a RoleError), or RoleError UNAVAILABLE once `peer` is found hung.

        `deadline_s()` is read at each wait: the work outstanding at the peer changes meanwhile.
        """
        reply = asyncio.ensure_future(_answer(call))
        found = asyncio.ensure_future(self._hung.setdefault(peer, asyncio.Event()).wait())
        try:
            while True:
                wait_s = deadline_s()
                done, _ = await asyncio.wait((reply, found), timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
                if reply in done:
                    return reply.result()
                if found in done:
                    return _failed(peer, method, reply, "found hung by another call")
                if not await self.answers(peer):
                    self._found(peer)
                    return _failed(peer, method, reply, f"no answer within its {wait_s:.2f} s deadline, "
                                                        f"nor its Health within {self.allowance_s:g} s")
        finally:
            found.cancel()
            if not reply.done():
                reply.cancel()
                getattr(call, "cancel", lambda: None)()  # a simulation's call is a bare coroutine
            reply.add_done_callback(_retrieved)  # its failure, if nobody awaits it now, is not an unseen error

    async def close(self) -> None:
        for task in self._watchers.values():
            task.cancel()
        await asyncio.gather(*self._watchers.values(), return_exceptions=True)

    def _found(self, peer: str) -> None:
        """`peer` is hung: every call open to it fails now, new ones at once, until it answers again."""
        self._hung.setdefault(peer, asyncio.Event()).set()
        log.warning("%s is hung: no answer to a call past its deadline nor to Health within %g s; "
                    "passing it over until it answers", peer, self.allowance_s)
        if peer not in self._watchers:
            self._watchers[peer] = asyncio.ensure_future(self._watch(peer, confirmed=True))

    async def _watch(self, peer: str, confirmed: bool) -> None:
        """Ask `peer`'s Health every allowance until it answers; found hung on the first silence."""
        try:
            while not await self.answers(peer):
                if not confirmed:
                    confirmed = True
                    self._found(peer)
                await asyncio.sleep(self.allowance_s)  # a crashed peer refuses at once: ask at this pace
            if confirmed:
                log.warning("%s answers its Health again", peer)
            self._hung.pop(peer, None)
        finally:
            self._watchers.pop(peer, None)


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
