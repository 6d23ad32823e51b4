"""Resets noticed while a connection's reading is paused.

asyncio stops watching a socket whose reading it has paused, so a peer's reset waits until the
link reads that socket again, which on a shaped line is when its queue has drained below the bound:
the reset connection's queued bytes cross the line first, though a reset connection's flows forget
their queue (Connection.close). A KV sender resets a connection to drop a stopped transfer's bytes
(services/kv/sender.py), and these are the very bytes that must not cross.

One epoll set watches the link's sockets for errors and hang-ups only (never for data, so it wakes
on nothing else), and a socket that reports a pending error is passed on as lost at once
(docs/netem.md, "A reset while paused"). Where there is no epoll, a reset is noticed when reading
resumes.
"""

from __future__ import annotations

import asyncio
import os
import select
import socket
from typing import Callable

_HANGUP = getattr(select, "EPOLLERR", 0) | getattr(select, "EPOLLHUP", 0)


class HangupWatch:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._epoll = select.epoll() if hasattr(select, "epoll") else None
        self._watched: dict[int, tuple[socket.socket, Callable[[OSError], None]]] = {}
        if self._epoll is not None:
            loop.add_reader(self._epoll.fileno(), self._on_events)

    def watch(self, sock: socket.socket, on_error: Callable[[OSError], None]) -> int | None:
        """Call `on_error` once if `sock` reports an error (a reset); the fd to `forget`, or None."""
        if self._epoll is None:
            return None
        fd = sock.fileno()
        try:
            self._epoll.register(fd, _HANGUP)
        except OSError:
            return None  # closed meanwhile: its transport reports it
        self._watched[fd] = (sock, on_error)
        return fd

    def forget(self, fd: int | None) -> None:
        """Stop watching; call it before the socket closes, so a reused fd is never mistaken for it."""
        if fd is None or self._watched.pop(fd, None) is None:
            return
        try:
            self._epoll.unregister(fd)  # type: ignore[union-attr]
        except OSError:
            pass  # already gone from the set with its socket

    def _on_events(self) -> None:
        for fd, _ in self._epoll.poll(0):  # type: ignore[union-attr]
            watched = self._watched.get(fd)
            if watched is None:
                continue
            self.forget(fd)  # level-triggered: once is enough either way
            sock, on_error = watched
            try:
                errno = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            except OSError as exc:
                errno = exc.errno or 0
            if errno:
                on_error(ConnectionResetError(errno, os.strerror(errno)))
            # else both halves ended in order: the bytes still unread are the transport's to read

    def close(self) -> None:
        if self._epoll is None:
            return
        self._loop.remove_reader(self._epoll.fileno())
        self._watched.clear()
        self._epoll.close()
        self._epoll = None
