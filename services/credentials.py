"""Secrets a deployment makes at start: random tokens in files only their owner reads.

The gRPC deployment token (services/rpc/auth.py) and the links' control token
(services/launcher/link_host.py) come from here: made by `pdd-emu up` or by compose's
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
