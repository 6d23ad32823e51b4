"""pdd-emu: an emulated cross-datacenter Prefill / Relay-Decode / Main-Decode mesh."""

__version__ = "0.1.0"
