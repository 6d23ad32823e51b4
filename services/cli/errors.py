"""One way for every command to refuse bad input: a clear line on stderr, exit 2."""

from __future__ import annotations

import sys
from typing import NoReturn

USAGE_EXIT = 2


class UsageError(ValueError):
    """Input a person can fix; the message names what was wrong and the valid choices."""


def fail(message: str) -> NoReturn:
    print(f"pdd-emu: error: {message}", file=sys.stderr)
    raise SystemExit(USAGE_EXIT)
