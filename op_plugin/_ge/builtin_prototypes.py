"""CANN's built-in GE op prototypes, as the pinned TorchAir ships them.

Read from the unpacked torch-npu wheel without importing anything in it: the `REG_OP` docstrings of
TorchAir's generated op table, with attr defaults whose dtype names are numbered by CANN's own
`graph/c_types.h` from the same wheel. Raises OSError when the wheel is not unpacked.
"""
from __future__ import annotations

import functools

from .._base.wheel import simulator_dir
from .ir import IrPrototype
from .reg_op import parse_dtype_enum, parse_reg_ops, reg_op_texts

# Relative to the unpacked wheel: TorchAir's generated op table, then the ops it writes by hand with
# dynamic outputs, then the ones in its graph module (Cast); the first file naming a type wins.
RAW_OPS = "torch_npu/dynamo/torchair/_ge_concrete_graph/auto_generated_ge_raw_ops.py"
PROTOTYPE_FILES = (RAW_OPS, "torch_npu/dynamo/torchair/_ge_concrete_graph/dynamic_output_ops.py",
                   "torch_npu/dynamo/torchair/ge/_ge_graph.py")
DTYPE_HEADER = "torch_npu/include/graph/c_types.h"


@functools.lru_cache(maxsize=1)
def _dtype_numbers() -> dict[str, int]:
    return parse_dtype_enum((simulator_dir() / DTYPE_HEADER).read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=1)
def _texts() -> dict[str, tuple[str, ...]]:
    """GE op type -> its REG_OP docstrings, in PROTOTYPE_FILES' order: found by one regex pass, parsed per type
    when asked (building all ~1,700 prototypes cost a compile ~0.1 s; a graph needs a few dozen)."""
    folder = simulator_dir()
    texts: dict[str, list[str]] = {}
    for name in PROTOTYPE_FILES:
        for op_type, text in reg_op_texts((folder / name).read_text(encoding="utf-8")):
            texts.setdefault(op_type, []).append(text)
    return {op_type: tuple(found) for op_type, found in texts.items()}


@functools.lru_cache(maxsize=None)
def builtin_prototype(op_type: str) -> IrPrototype | None:
    """CANN's prototype of `op_type`: the first file's that parses (OSError when the wheel is not unpacked)."""
    for text in _texts().get(op_type, ()):
        prototype = parse_reg_ops(text, _dtype_numbers()).get(op_type)
        if prototype is not None:
            return prototype
    return None


@functools.lru_cache(maxsize=1)
def builtin_prototypes() -> dict[str, IrPrototype]:
    """GE op type -> CANN's prototype, every one (OSError when the simulator's wheel is not unpacked)."""
    found = {op_type: builtin_prototype(op_type) for op_type in _texts()}
    return {op_type: prototype for op_type, prototype in found.items() if prototype is not None}
