"""Keep one mesh process running: restart it when it fails, like compose's `restart: on-failure`.

    python -m services.launcher.keeper --status FILE [--max-restarts 5] [--health URL] -- COMMAND...

The keeper is the process the launcher starts; the service is its child, in the
same process group and writing to the same log. When the child exits with a
non-zero status or is killed by a signal, the keeper logs one line and starts
the very same command again after a back-off that doubles from `--backoff` to
`--max-backoff`; a run that lasted RESET_AFTER_S resets it. After
`--max-restarts` failures in a row it gives up and exits with the child's
status. A clean exit (0) is not restarted. SIGTERM or SIGINT to the keeper is
passed to the child, and the keeper exits when it has. The status file (JSON,
replaced atomically) says what runs now: `child_pid`, `restarts`,
`last_exit_code` (a negative number is the signal), `state`.

With `--health URL` the keeper also checks that the child answers, as a compose healthcheck with a
restart policy would: once the child has answered URL (any HTTP status: a draining service is
alive), a GET is made every `--health-interval` seconds with `--health-timeout` to answer, and
after `--health-retries` misses in a row the child is hung (SIGSTOP, a wedged event loop): the
keeper logs one line and SIGKILLs it, and the restart above follows. A hang therefore lasts at most

    retries x (interval + timeout)

(each check waits an interval, then up to a timeout) before the kill (docs/hangs.md). The status
file then also has `hung_kills`.

Only the standard library: the keeper must start fast and stay small.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

RESET_AFTER_S = 10.0  # Docker resets its restart back-off once a container has run this long
STOP_GRACE_S = 10.0  # matches `pdd-emu down`: SIGKILL after this
# The liveness defaults (docs/hangs.md): a miss is 2.5 s without an answer, the router's
# allowance for a loaded host (services/router/deadlines.py HOST_ALLOWANCE_S); two in a row, so one
# late answer is not a hang. A hang is killed within 2 x (1 + 2.5) = 7 s.
HEALTH_INTERVAL_S = 1.0
HEALTH_TIMEOUT_S = 2.5
HEALTH_RETRIES = 2


class Liveness:
    """The child's liveness check: `url` answered (any HTTP status) within `timeout_s`, every `interval_s`."""

    def __init__(self, url: str, interval_s: float = HEALTH_INTERVAL_S, timeout_s: float = HEALTH_TIMEOUT_S,
                 retries: int = HEALTH_RETRIES) -> None:
        self.url, self.interval_s, self.timeout_s, self.retries = url, interval_s, timeout_s, retries

    @property
    def bound_s(self) -> float:
        """The longest a hang lasts before the kill: `retries` checks, each an interval's wait and a timeout."""
        return self.retries * (self.interval_s + self.timeout_s)

    def answers(self) -> bool:
        """Any HTTP answer is alive: a draining service may say so with its status, and is not hung."""
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout_s):
                return True
        except urllib.error.HTTPError:
            return True
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def watch(self, child: subprocess.Popen, ended: threading.Event, on_hung) -> None:
        """Poll until `ended` is set or the child exits; call `on_hung(child)` after `retries` misses in a
        row. Misses before the child's first answer are its start-up, not a hang."""
        answered, misses = False, 0
        while not ended.wait(self.interval_s) and child.poll() is None:
            if self.answers():
                answered, misses = True, 0
                continue
            if answered:
                misses += 1
            if misses >= self.retries and not ended.is_set():
                on_hung(child)
                return


class Keeper:
    def __init__(self, cmd: list[str], status: Path, max_restarts: int, backoff_s: float, max_backoff_s: float,
                 stop_grace_s: float = STOP_GRACE_S, liveness: Liveness | None = None):
        self.cmd, self.status_path, self.stop_grace_s, self.liveness = cmd, status, stop_grace_s, liveness
        self.hung_kills = 0
        self.max_restarts, self.backoff_s, self.max_backoff_s = max_restarts, backoff_s, max_backoff_s
        self.child: subprocess.Popen | None = None
        self.restarts = 0
        self.failures_in_a_row = 0
        self.last_exit_code: int | None = None
        self.stopping = False
        self._killer: threading.Timer | None = None

    def write_status(self, state: str) -> None:
        status = {"keeper_pid": os.getpid(), "child_pid": self.child.pid if self.child else None, "state": state,
                  "restarts": self.restarts, "last_exit_code": self.last_exit_code, "cmd": self.cmd,
                  "hung_kills": self.hung_kills,
                  "updated_at": time.time()}
        tmp = self.status_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(status))
        tmp.replace(self.status_path)

    def stop(self, signum: int, _frame: object) -> None:
        self.stopping = True
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)
            if self._killer is None:  # SIGKILL if it ignores the signal for the whole grace period
                self._killer = threading.Timer(self.stop_grace_s, self._kill)
                self._killer.daemon = True
                self._killer.start()

    def _kill(self) -> None:
        if self.child is not None and self.child.poll() is None:
            self.child.kill()

    def run(self) -> int:
        while True:
            started = time.monotonic()
            self.child = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL)
            self.write_status("running")
            code = self._wait_child()
            self.last_exit_code = code
            if self.stopping or code == 0:
                self.write_status("stopped" if self.stopping else "exited")
                return code
            ran_s = time.monotonic() - started
            self.failures_in_a_row = 1 if ran_s >= RESET_AFTER_S else self.failures_in_a_row + 1
            if self.failures_in_a_row > self.max_restarts:
                _say(f"exited with {_describe(code)}; {self.max_restarts} restarts in a row failed, giving up")
                self.write_status("gave-up")
                return code if code > 0 else 128 - code
            delay = min(self.backoff_s * 2 ** (self.failures_in_a_row - 1), self.max_backoff_s)
            self.restarts += 1
            _say(f"exited with {_describe(code)} after {ran_s:.1f} s; restart {self.restarts} in {delay:g} s")
            self.write_status("backoff")
            deadline = time.monotonic() + delay
            while not self.stopping and time.monotonic() < deadline:
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))  # a signal ends it early
            if self.stopping:
                self.write_status("stopped")
                return code

    def _wait_child(self) -> int:
        if self.liveness is None:
            return self._wait()
        ended = threading.Event()
        watcher = threading.Thread(target=self.liveness.watch, args=(self.child, ended, self._kill_hung),
                                   name="liveness", daemon=True)
        watcher.start()
        try:
            return self._wait()
        finally:
            ended.set()
            watcher.join()

    def _kill_hung(self, child: subprocess.Popen) -> None:
        if self.stopping or child.poll() is not None:
            return
        self.hung_kills += 1
        _say(f"no answer from {self.liveness.url} {self.liveness.retries} times in a row "
             f"({self.liveness.timeout_s:g} s each): hung; killing it")
        child.kill()  # SIGKILL ends a stopped process too; the restart follows as for any failure

    def _wait(self) -> int:
        # A blocking wait: Popen.wait with a timeout polls, every 50 ms at most, and a mesh of six
        # keepers polling costs more CPU than some of its services do idle. A stop signal still runs
        # its handler at once (the wait is retried after it, PEP 475), which arms the SIGKILL.
        assert self.child is not None
        return self.child.wait()


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"status {code}"


def _say(line: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} keeper: {line}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.launcher.keeper", description=__doc__.split("\n")[0])
    parser.add_argument("--status", type=Path, required=True, help="JSON status file to keep up to date")
    parser.add_argument("--max-restarts", type=int, default=5, help="failures in a row before giving up")
    parser.add_argument("--backoff", type=float, default=0.5, help="first restart delay, seconds")
    parser.add_argument("--max-backoff", type=float, default=8.0, help="longest restart delay, seconds")
    parser.add_argument("--stop-grace", type=float, default=STOP_GRACE_S,
                        help="seconds a stopped child has before SIGKILL")
    parser.add_argument("--health", help="URL the child must answer (any HTTP status); unset: no liveness check")
    parser.add_argument("--health-interval", type=float, default=HEALTH_INTERVAL_S, help="seconds between checks")
    parser.add_argument("--health-timeout", type=float, default=HEALTH_TIMEOUT_S, help="seconds a check may take")
    parser.add_argument("--health-retries", type=int, default=HEALTH_RETRIES,
                        help="misses in a row after which the child is hung and killed")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the command to keep running")
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        parser.error("no command to keep running")
    liveness = None if not args.health else Liveness(args.health, args.health_interval, args.health_timeout,
                                                      args.health_retries)
    keeper = Keeper(cmd, args.status, args.max_restarts, args.backoff, args.max_backoff, args.stop_grace, liveness)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, keeper.stop)
    return keeper.run()


if __name__ == "__main__":
    sys.exit(main())
