"""Link emulation: a userspace asyncio link (default) and a kernel qdisc backend.

See docs/netem.md for the model, the formulas and the measured accuracy.
"""

from netem.config import ConfigError, DirectionConfig, LinkConfig
from netem.link import UserspaceLink

__all__ = ["ConfigError", "DirectionConfig", "LinkConfig", "UserspaceLink"]
