"""The GE interpreter's two errors: a graph it cannot run, and a kernel refusing its inputs."""
from __future__ import annotations

from ..._ge.graph import GeGraphError


class GeExecutionError(GeGraphError, RuntimeError):
    """The GE graph cannot be executed, or a node produced a result that contradicts the graph."""


class KernelError(ValueError):
    """A kernel refuses its inputs or attrs (a case the simulator does not implement, or a graph
    CANN would reject); the executor adds the node's name and type."""


def refuse(message: str):
    """Stop the kernel with `message`: an input or attr value it does not implement is refused,
    never computed as something else."""
    raise KernelError(message)
