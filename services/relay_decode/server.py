"""The relay-decode process: the decode service's code, run in datacenter A next to prefill."""

from services.main_decode.server import serve

__all__ = ["serve"]
