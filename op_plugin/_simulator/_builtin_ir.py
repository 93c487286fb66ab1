"""The built-in GE operator prototypes, read from the pinned TorchAir's generated op table.

On an Ascend host CANN's op-proto library answers `get_registered_ir_def` for built-in ops
(RmsNorm, AddN, MatMulV2, ...). TorchAir ships the same prototypes as `REG_OP` text in the
docstrings of `_ge_concrete_graph/auto_generated_ge_raw_ops.py`; this module parses that text
(it does not import or execute the file), so the simulator answers built-in types as CANN would
and a YAML `ge:` mapping onto a built-in op can be checked against its real input/attr names.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from ._ir_registry import IrPrototype

RAW_OPS = Path("torch_npu/dynamo/torchair/_ge_concrete_graph/auto_generated_ge_raw_ops.py")

_ATTR_TYPES = {
    "Int": "VT_INT", "int": "VT_INT", "Float": "VT_FLOAT", "Bool": "VT_BOOL", "String": "VT_STRING",
    "Type": "VT_DATA_TYPE", "ListInt": "VT_LIST_INT", "ListFloat": "VT_LIST_FLOAT", "ListBool": "VT_LIST_BOOL",
    "ListString": "VT_LIST_STRING", "ListType": "VT_LIST_DATA_TYPE", "ListListInt": "VT_LIST_LIST_INT",
    "ListListFloat": "VT_LIST_LIST_FLOAT",
}
_INPUTS = {"INPUT": "required", "OPTIONAL_INPUT": "optional", "DYNAMIC_INPUT": "dynamic"}
_OUTPUTS = {"OUTPUT": "required", "DYNAMIC_OUTPUT": "dynamic"}
_REG_OP = re.compile(r'"""REG_OP\((\w+)\)(.*?)"""', re.S)
_ITEM = re.compile(r"\.(INPUT|OPTIONAL_INPUT|DYNAMIC_INPUT|OUTPUT|DYNAMIC_OUTPUT|ATTR|REQUIRED_ATTR)\((\w+),\s*(\w+)?")


def parse_reg_ops(text: str) -> dict[str, IrPrototype]:
    prototypes = {}
    for op_type, body in _REG_OP.findall(text):
        inputs, outputs, attrs = [], [], []
        for kind, name, type_name in _ITEM.findall(body):
            if kind in _INPUTS:
                inputs.append((name, _INPUTS[kind]))
            elif kind in _OUTPUTS:
                outputs.append((name, _OUTPUTS[kind]))
            elif type_name in _ATTR_TYPES:
                attrs.append((name, _ATTR_TYPES[type_name]))
        try:
            prototypes[op_type] = IrPrototype(op_type, tuple(inputs), tuple(outputs), tuple(attrs))
        except ValueError:
            continue  # a few generated entries list a name twice; no shipped mapping uses them
    return prototypes


@functools.lru_cache(maxsize=1)
def builtin_prototypes() -> dict[str, IrPrototype]:
    from ._install import simulator_dir

    path = simulator_dir() / RAW_OPS
    return parse_reg_ops(path.read_text(encoding="utf-8"))


def builtin_prototype(op_type: str) -> IrPrototype | None:
    return builtin_prototypes().get(op_type)
