"""Drive the compose deployment from tests: `docker compose` by subprocess, containers by the docker SDK."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import docker

from loadgen.sse import SseLineDecoder

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "compose" / "compose.yaml"
PROFILES = ("--profile", "load", "--profile", "chaos", "--profile", "netem")
LINK_TOKEN_FILE = "/run/pdd-emu/link/token"  # made by the stack's `tokens` service; only the links and tools mount it
UP_TIMEOUT_S = 420  # container creation copies the whole image on the vfs storage driver


class ComposeError(AssertionError):
    pass


class Stack:
    """One compose project, named uniquely for this test session."""

    def __init__(self, project: str, port: int) -> None:
        self.project, self.port = project, port
        self.client = docker.from_env(timeout=120)
        self.running: tuple[str, str] | None = None
        # No token: the stack makes its own (compose.yaml's `tokens` service).
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PDD_EMU_")} | {"PDD_EMU_PORT": str(port)}

    def compose(self, *args: str, timeout: float = UP_TIMEOUT_S, check: bool = True) -> str:
        cmd = ["docker", "compose", "-f", str(COMPOSE_FILE), "-p", self.project, *args]
        proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise ComposeError(f"{' '.join(cmd[5:])} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                               f"{proc.stderr[-3000:]}\n{self.diagnostics()}")
        return proc.stdout

    def up(self, scenario: str, overrides: str = "") -> None:
        """Run `scenario`; a changed scenario changes every container's environment, so all are recreated.

        The old containers go first: on the vfs storage driver each container is a full copy of the
        image, and recreating them in place holds two copies of every one at once.
        """
        if self.running == (scenario, overrides):
            return
        if self.running is not None:
            self.down()
        self.env.update(PDD_EMU_SCENARIO=scenario, PDD_EMU_SET=overrides)
        self.running = None
        self.compose("up", "-d", "--wait", "--wait-timeout", str(UP_TIMEOUT_S), timeout=UP_TIMEOUT_S + 60)
        self.running = (scenario, overrides)

    def down(self) -> None:
        self.compose(*PROFILES, "down", "-v", "--remove-orphans", "--timeout", "20", check=False)

    def container(self, service: str):  # type: ignore[no-untyped-def]
        found = self.client.containers.list(all=True, filters={"label": [
            f"com.docker.compose.project={self.project}", f"com.docker.compose.service={service}"]})
        if not found:
            raise ComposeError(f"no container for service {service!r} in project {self.project}")
        return found[0]

    def python(self, service: str, code: str) -> str:
        """Run a Python snippet inside a service's container; its stdout, or ComposeError."""
        result = self.container(service).exec_run(["python", "-c", code], demux=True)
        out, err = (part.decode(errors="replace") if part else "" for part in result.output)
        if result.exit_code != 0:
            raise ComposeError(f"python in {service} exited {result.exit_code}: {err[-2000:]}")
        return out

    def get_json(self, service: str, port: int, path: str, token: bool = False) -> dict:
        """GET http://127.0.0.1:PORT/PATH from inside a container (the datacenter networks are internal)."""
        header = f"{{'Authorization': 'Bearer ' + open('{LINK_TOKEN_FILE}').read()}}" if token else "{}"
        return json.loads(self.python(service, (
            "import sys, urllib.request; request = urllib.request.Request("
            f"'http://127.0.0.1:{port}{path}', headers={header}); "
            "sys.stdout.write(urllib.request.urlopen(request, timeout=10).read().decode())")))

    def wan_stats(self) -> dict:
        return self.get_json("wan-link", 8080, "/stats")

    def plan(self) -> dict:
        return json.loads(self.python("wan-link", "print(open('/plan/plan.json').read())"))

    def diagnostics(self) -> str:
        ps = subprocess.run(["docker", "compose", "-f", str(COMPOSE_FILE), "-p", self.project, *PROFILES, "ps", "-a"],
                            env=self.env, capture_output=True, text=True, timeout=60).stdout
        logs = subprocess.run(["docker", "compose", "-f", str(COMPOSE_FILE), "-p", self.project, "logs", "--tail",
                               "30", "--no-color"], env=self.env, capture_output=True, text=True, timeout=60).stdout
        return f"--- ps\n{ps}--- logs\n{logs}"


@dataclass
class Outcome:
    status: int = 0
    texts: list[str] = field(default_factory=list)
    pdd: dict | None = None
    error: str | None = None  # what the server reported: an HTTP error or an SSE error event
    broken: str | None = None  # what went wrong on the wire instead: a cut stream, a timeout
    first_token_s: float | None = None

    @property
    def text(self) -> str:
        return "".join(self.texts)


def stream_completion(port: int, prompt: list[int], max_tokens: int, deadline_s: float = 120.0,
                      on_token: Callable[[Outcome], None] | None = None) -> Outcome:
    """POST a streaming completion and read it to [DONE], an error event, or a broken stream."""
    outcome, started = Outcome(), time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=deadline_s)
    body = json.dumps({"model": "llama3-8b", "prompt": prompt, "max_tokens": max_tokens, "stream": True})
    try:
        conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        reply = conn.getresponse()
        outcome.status = reply.status
        if reply.status != 200:
            outcome.error = f"HTTP {reply.status}: {reply.read().decode(errors='replace')}"
            return outcome
        decoder = SseLineDecoder()
        while time.monotonic() - started < deadline_s:
            line = reply.readline()
            if not line:
                outcome.broken = "stream ended without [DONE]"
                return outcome
            data = decoder.feed(line.decode())
            if data is None:
                continue
            if data == "[DONE]":
                return outcome
            event = json.loads(data)
            if "error" in event:
                outcome.error = json.dumps(event["error"])
                continue
            if event.get("pdd"):
                outcome.pdd = event["pdd"]
            text = event["choices"][0]["text"]
            if text:
                outcome.first_token_s = outcome.first_token_s or time.monotonic() - started
                outcome.texts.append(text)
                if on_token is not None:
                    on_token(outcome)
        outcome.broken = f"no [DONE] within {deadline_s:g} s"
        return outcome
    except (OSError, http.client.HTTPException) as exc:  # socket timeouts are OSErrors too
        outcome.broken = f"{type(exc).__name__}: {exc}"
        return outcome
    finally:
        conn.close()
