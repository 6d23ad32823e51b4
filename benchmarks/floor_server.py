"""The floor of a streamed token's cost: a bare aiohttp server that writes one OpenAI chunk per token.

No mesh, no gRPC, no engine: every `step_s` one timer wakes every open stream,
and each writes one `text_completion` chunk, built with `json.dumps` the way a
plain server would. benchmarks/bench_token_cost.py sends it the same load as
the meshes and divides their CPU per token by this server's.

    python -m benchmarks.floor_server --port 8300 [--step-ms 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid

from aiohttp import web

STEP_KEY = web.AppKey("step", object)


class Steps:
    """One shared tick, like an engine step: every stream writes its next chunk when it fires."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self._tick = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time()
        while True:
            deadline += self.step_s
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            tick, self._tick = self._tick, asyncio.Event()
            tick.set()

    async def next(self) -> None:
        await self._tick.wait()


async def completions(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    steps: Steps = request.app[STEP_KEY]
    rid, created, model = f"cmpl-{uuid.uuid4().hex[:24]}", int(time.time()), body["model"]
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    for i in range(int(body["max_tokens"])):
        await steps.next()
        choice = {"index": 0, "text": f" w{i}", "logprobs": None, "finish_reason": None}
        chunk = {"id": rid, "object": "text_completion", "created": created, "model": model, "choices": [choice]}
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    return response


def build_app(step_s: float) -> web.Application:
    app = web.Application()
    app[STEP_KEY] = steps = Steps(step_s)
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/health", lambda _request: web.json_response({"status": "ok"}))

    async def steps_ctx(_app: web.Application):
        steps.start()
        yield

    app.cleanup_ctx.append(steps_ctx)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--step-ms", type=float, default=10.0, help="time between two chunks of one stream")
    args = parser.parse_args()
    web.run_app(build_app(args.step_ms / 1e3), host=args.host, port=args.port, print=None)


if __name__ == "__main__":
    main()
