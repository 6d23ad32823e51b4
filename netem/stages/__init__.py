"""One impairment per module; a connection's chain is built in netem.direction."""

from netem.stages.base import Chunk, Stage, run_stages

__all__ = ["Chunk", "Stage", "run_stages"]
