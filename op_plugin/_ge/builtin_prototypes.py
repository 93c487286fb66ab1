"""CANN's built-in GE op prototypes, as the pinned TorchAir ships them.

Read from the unpacked torch-npu wheel without importing anything in it: the `REG_OP` docstrings of
TorchAir's generated op table, with attr defaults whose dtype names are numbered by CANN's own
`graph/c_types.h` from the same wheel. Raises OSError when the wheel is not unpacked.
"""
from __future__ import annotations

import functools

from .._base.wheel import simulator_dir
from .ir import IrPrototype
from .reg_op import parse_dtype_enum, parse_reg_ops

# Relative to the unpacked wheel: TorchAir's generated op table, then the ops it writes by hand with
# dynamic outputs, then the ones in its graph module (Cast); the first file naming a type wins.
RAW_OPS = "torch_npu/dynamo/torchair/_ge_concrete_graph/auto_generated_ge_raw_ops.py"
PROTOTYPE_FILES = (RAW_OPS, "torch_npu/dynamo/torchair/_ge_concrete_graph/dynamic_output_ops.py",
                   "torch_npu/dynamo/torchair/ge/_ge_graph.py")
DTYPE_HEADER = "torch_npu/include/graph/c_types.h"


@functools.lru_cache(maxsize=1)
def builtin_prototypes() -> dict[str, IrPrototype]:
    """GE op type -> CANN's prototype (OSError when the simulator's wheel is not unpacked)."""
    folder = simulator_dir()
    dtype_numbers = parse_dtype_enum((folder / DTYPE_HEADER).read_text(encoding="utf-8"))
    prototypes: dict[str, IrPrototype] = {}
    for name in PROTOTYPE_FILES:
        for op_type, prototype in parse_reg_ops((folder / name).read_text(encoding="utf-8"), dtype_numbers).items():
            prototypes.setdefault(op_type, prototype)
    return prototypes


def builtin_prototype(op_type: str) -> IrPrototype | None:
    return builtin_prototypes().get(op_type)
