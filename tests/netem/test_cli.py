"""`pdd-emu link` as a user runs it: a subprocess, its ready line, its exit codes."""

import asyncio
import re
import signal
import subprocess
import sys

import pytest

from tests.netem.servers import WAIT_S, Echo, read_all

CMD = [sys.executable, "-m", "services.cli", "link"]
READY = re.compile(r"^pdd-emu link: ready listen=(\S+):(\d+) upstream=(\S+) control=(\S+)$")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--delay", "20parsecs"], "duration unit"),
        (["--rate", "fast"], "rate"),
        (["--queue", "-1"], "size"),
        (["--loss", "150%"], "outside"),
        (["--jitter-dist", "cauchy"], "jitter_dist"),
        (["--control", "nowhere"], "HOST:PORT"),
        (["--control", "0.0.0.0:0"], "control-token"),
        (["--schedule", "/nonexistent.yaml"], "cannot read"),
        (["--seed", "x"], "invalid int"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(args, message):
    proc = subprocess.run([*CMD, "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", *args],
                          capture_output=True, text=True, timeout=WAIT_S, env=_env())
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_address_exits_2():
    proc = subprocess.run([*CMD, "--listen", "localhost", "--upstream", "127.0.0.1:9"],
                          capture_output=True, text=True, timeout=WAIT_S, env=_env())
    assert proc.returncode == 2 and "HOST:PORT" in proc.stderr


async def test_ready_line_then_traffic_then_clean_shutdown_on_sigterm():
    async with Echo() as echo:
        proc = await asyncio.create_subprocess_exec(
            *CMD, "--listen", "127.0.0.1:0", "--upstream", f"{echo.address[0]}:{echo.address[1]}",
            "--delay", "5ms", "--rate", "800mbit", "--control", "127.0.0.1:0", "--seed", "3",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=_env())
        try:
            line = (await asyncio.wait_for(proc.stdout.readline(), WAIT_S)).decode().rstrip("\n")
            match = READY.match(line)
            assert match, line
            host, port, upstream, control = match.groups()
            assert int(port) != 0 and upstream == f"{echo.address[0]}:{echo.address[1]}"
            assert re.fullmatch(r"127\.0\.0\.1:[1-9]\d*", control)
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"through the link")
            writer.write_eof()
            assert await read_all(reader) == b"through the link"
            writer.close()
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), WAIT_S) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def test_without_control_the_ready_line_says_dash_and_sigint_stops_it():
    proc = await asyncio.create_subprocess_exec(
        *CMD, "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=_env())
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), WAIT_S)).decode()
        assert READY.match(line.rstrip("\n")).group(4) == "-"
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), WAIT_S) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_kernel_backend_falls_back_with_one_line_when_it_cannot_shape():
    proc = await asyncio.create_subprocess_exec(
        *CMD, "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--delay", "10ms", "--backend", "kernel",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=_env())
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), WAIT_S)).decode()
        assert READY.match(line.rstrip("\n"))
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), WAIT_S) == 0
        err = (await proc.stderr.read()).decode().strip().splitlines()
        assert len(err) == 1 and "kernel backend unavailable" in err[0] and "userspace" in err[0]
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.pop("PDD_EMU_LINK_TOKEN", None)
    return env
