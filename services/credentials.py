"""Secrets a deployment makes at start: random tokens in files only their owner reads.

The gRPC deployment token (services/rpc/auth.py) and the links' control token
(netem/control.py, `link_token`) come from here: made by `pdd-emu up` or by compose's
`tokens` service, read from a file named in the environment (or the environment itself),
never put on a command line or in a log line.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

TOKEN_BYTES = 24  # 192 random bits
MESH_TOKEN_ENV = "PDD_EMU_MESH_TOKEN"  # the gRPC deployment token itself
MESH_TOKEN_FILE_ENV = "PDD_EMU_MESH_TOKEN_FILE"  # or a file holding it (`pdd-emu up`: RUN_DIR/mesh-token)
LINK_TOKEN_ENV = "PDD_EMU_LINK_TOKEN"  # the links' control token itself (a user's own)
LINK_TOKEN_FILE_ENV = "PDD_EMU_LINK_TOKEN_FILE"  # or a file holding it (compose: a volume)
LINK_TOKEN_FILE = "link-token"  # the file `pdd-emu up` makes in its RUN_DIR


class MissingToken(RuntimeError):
    pass


def new_token() -> str:
    return secrets.token_hex(TOKEN_BYTES)


def write_token(path: Path, token: str, keep: bool = False) -> bool:
    """Write `token` to `path`, readable and writable by its owner only (created so, never widened).

    keep: leave a token already there as it is (compose makes its tokens at the stack's first start
    only). True when this call wrote one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_EXCL if keep else os.O_TRUNC), 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as out:
        out.write(token)
    return True


def token_from(environ, value_env: str, file_env: str) -> str | None:
    """A token from the file $`file_env` names (first) or from $`value_env`; None when neither is set.

    MissingToken when the file is named but unreadable or empty: a process told where its token is
    must not start without it."""
    path = environ.get(file_env)
    if path:
        try:
            token = Path(path).read_text().strip()
        except OSError as exc:
            raise MissingToken(f"${file_env} names {path}, which cannot be read: {exc.strerror}") from None
        if not token:
            raise MissingToken(f"${file_env} names {path}, which is empty")
        return token
    return environ.get(value_env) or None


def link_token(environ=os.environ, run_dir: Path | None = None) -> str | None:
    """The links' control token: the environment's (token_from), else a running `pdd-emu up` mesh's
    RUN_DIR/link-token when `run_dir` is given and has one; None for none (links on loopback only)."""
    token = token_from(environ, LINK_TOKEN_ENV, LINK_TOKEN_FILE_ENV)
    if token is None and run_dir is not None and (run_dir / LINK_TOKEN_FILE).exists():
        token = token_from({LINK_TOKEN_FILE_ENV: str(run_dir / LINK_TOKEN_FILE)}, LINK_TOKEN_ENV, LINK_TOKEN_FILE_ENV)
    return token
