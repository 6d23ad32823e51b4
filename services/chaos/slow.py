"""A client that consumes its stream slowly, or hangs up in the middle of it.

aiohttp's client reads eagerly into large buffers; to make the router see a
slow consumer the socket's receive buffer is made small and the bytes are
read a few hundred at a time with a pause in between (that pause is the fault
itself). HTTP/1.1 is spoken by hand: a request with Content-Length, and the
chunked answer decoded here.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from urllib.parse import urlsplit

from services.chaos.client import StreamJudge, Target
from services.chaos.outcomes import Outcome

RECEIVE_BUFFER_BYTES = 4096
HEADER_LIMIT_BYTES = 64 * 1024


class ChunkedBody:
    """Decodes `Transfer-Encoding: chunked` as bytes arrive; returns the payload and whether it ended."""

    def __init__(self) -> None:
        self.buffer = b""
        self.ended = False

    def feed(self, data: bytes) -> bytes:
        self.buffer += data
        payload = []
        while not self.ended:
            line_end = self.buffer.find(b"\r\n")
            if line_end < 0:
                break
            size = int(self.buffer[:line_end].split(b";")[0], 16)
            if size == 0:
                self.ended = True
                break
            chunk_end = line_end + 2 + size
            if len(self.buffer) < chunk_end + 2:
                break  # wait for the whole chunk: SSE events are small
            payload.append(self.buffer[line_end + 2:chunk_end])
            self.buffer = self.buffer[chunk_end + 2:]
        return b"".join(payload)


async def slow_completion(target: Target, outcome: Outcome, prompt: list[int], max_tokens: int, read_bytes: int,
                          pause_s: float, hang_up_after: int | None = None) -> Outcome:
    """Stream one completion reading `read_bytes` every `pause_s`; hang up after that many tokens if asked."""
    sent_at = time.perf_counter()
    outcome.send_s = sent_at - target.clock_start
    expected = target.expected.text(target.expected.ids(prompt, max_tokens))
    judge = StreamJudge(outcome, expected, sent_at, target.clock_start)
    address = urlsplit(target.url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)  # before connect: sets the window
    sock.setblocking(False)
    writer = None
    try:
        async with asyncio.timeout(target.deadline_s):
            await asyncio.get_running_loop().sock_connect(sock, (address.hostname, address.port))
            reader, writer = await asyncio.open_connection(sock=sock, limit=HEADER_LIMIT_BYTES)
            body = json.dumps({"model": target.model, "prompt": prompt, "max_tokens": max_tokens,
                               "stream": True}).encode()
            writer.write(f"POST /v1/completions HTTP/1.1\r\nHost: {address.netloc}\r\nConnection: close\r\n"
                         f"Content-Type: application/json\r\nx-request-id: {outcome.request_id}\r\n"
                         f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            await writer.drain()
            if hang_up_after == 0:
                return _hang_up(judge)
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            outcome.http_status = int(head.split(" ", 2)[1])
            if outcome.http_status != 200:
                return _judge_error_body(judge, (await reader.read()).decode("utf-8", "replace"))
            chunked, pending = ChunkedBody(), ""
            while not chunked.ended:
                data = await reader.read(read_bytes)
                if not data:
                    judge.end("lost", f"connection closed inside the stream after {len(judge.pieces)} tokens")
                    return outcome
                pending += chunked.feed(data).decode("utf-8", "replace")
                *lines, pending = pending.split("\n")
                for line in lines:
                    if judge.feed_line(line):
                        return outcome
                    if hang_up_after is not None and len(judge.pieces) >= hang_up_after:
                        return _hang_up(judge)
                await asyncio.sleep(pause_s)
            judge.end("lost", f"stream ended without [DONE] or an error after {len(judge.pieces)} tokens")
    except TimeoutError:
        judge.end("lost", f"no outcome within the client deadline of {target.deadline_s:g} s")
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
        judge.end("lost", f"connection broke without an error: {type(exc).__name__}: {exc}")
    finally:
        if writer is not None:
            writer.close()
        else:
            sock.close()
    return outcome


def _hang_up(judge: StreamJudge) -> Outcome:
    judge.end("abandoned", f"the client hung up after {len(judge.pieces)} tokens")
    return judge.outcome


def _judge_error_body(judge: StreamJudge, text: str) -> Outcome:
    body = text.split("\r\n\r\n", 1)[-1]
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = None
    judge.end("failed" if message else "lost", message or f"HTTP {judge.outcome.http_status} without a message")
    return judge.outcome
