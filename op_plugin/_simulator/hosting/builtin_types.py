"""Which GE op types are CANN built-ins, as far as the simulator knows them."""
from __future__ import annotations

from .ir_registry import builtin_prototypes
from ..interpreter.kernels import builtin_op_types


def builtin_ge_types() -> set[str]:
    """GE op types CANN already ships kernels for: TorchAir's generated REG_OP table plus the ones
    TorchAir defines by hand (Cast, MatMulV3, ...), which the executor implements as built-ins."""
    types = set(builtin_op_types())
    try:
        types |= set(builtin_prototypes())
    except OSError:  # the simulator is not installed: the executor's list is all we know
        pass
    return types
