"""CANN's `REG_OP` prototype text parsed into `IrPrototype`s.

TorchAir ships the prototypes of CANN's built-in ops as `REG_OP` text in the docstrings of
`_ge_concrete_graph/auto_generated_ge_raw_ops.py`. `parse_reg_ops` reads that text (it never
imports or executes the file), so built-in types are answered as CANN would answer them and a
YAML `ge:` mapping onto a built-in op can be checked against its real input and attr names.
"""
from __future__ import annotations

import re

from .ir import AttrType, InputKind, IrPrototype, OutputKind

_ATTR_TYPES = {
    "Int": AttrType.INT, "int": AttrType.INT, "Float": AttrType.FLOAT, "Bool": AttrType.BOOL,
    "String": AttrType.STRING, "Type": AttrType.DATA_TYPE, "ListInt": AttrType.LIST_INT,
    "ListFloat": AttrType.LIST_FLOAT, "ListBool": AttrType.LIST_BOOL, "ListString": AttrType.LIST_STRING,
    "ListType": AttrType.LIST_DATA_TYPE, "ListListInt": AttrType.LIST_LIST_INT,
    "ListListFloat": AttrType.LIST_LIST_FLOAT,
}
_INPUTS = {"INPUT": InputKind.REQUIRED, "OPTIONAL_INPUT": InputKind.OPTIONAL, "DYNAMIC_INPUT": InputKind.DYNAMIC}
_OUTPUTS = {"OUTPUT": OutputKind.REQUIRED, "DYNAMIC_OUTPUT": OutputKind.DYNAMIC}
_REG_OP = re.compile(r'"""REG_OP\((\w+)\)(.*?)"""', re.S)
_ITEM = re.compile(r"\.(INPUT|OPTIONAL_INPUT|DYNAMIC_INPUT|OUTPUT|DYNAMIC_OUTPUT|ATTR|REQUIRED_ATTR)\((\w+),\s*(\w+)?")


def parse_reg_ops(text: str) -> dict[str, IrPrototype]:
    """GE op type -> prototype, for every `REG_OP(...)` docstring in `text`."""
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
