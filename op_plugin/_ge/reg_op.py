"""CANN's `REG_OP` prototype text parsed into `IrPrototype`s, attr defaults included.

TorchAir ships the prototypes of CANN's built-in ops as `REG_OP` text in the docstrings of
`_ge_concrete_graph/auto_generated_ge_raw_ops.py`. `parse_reg_ops` reads that text (it never
imports or executes the file), so built-in types are answered as CANN would answer them, a YAML
`ge:` mapping onto a built-in op can be checked against its real input and attr names, and the GE
interpreter's kernels take their attr defaults from CANN instead of copies written by hand.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from .ir import REQUIRED, AttrType, InputKind, IrPrototype, OutputKind

_ATTR_TYPES = {
    "Int": AttrType.INT, "int": AttrType.INT, "Float": AttrType.FLOAT, "Bool": AttrType.BOOL,
    "String": AttrType.STRING, "Type": AttrType.DATA_TYPE, "ListInt": AttrType.LIST_INT,
    "ListFloat": AttrType.LIST_FLOAT, "ListBool": AttrType.LIST_BOOL, "ListString": AttrType.LIST_STRING,
    "ListType": AttrType.LIST_DATA_TYPE, "ListListInt": AttrType.LIST_LIST_INT,
    "ListListFloat": AttrType.LIST_LIST_FLOAT,
}
_INPUTS = {"INPUT": InputKind.REQUIRED, "OPTIONAL_INPUT": InputKind.OPTIONAL, "DYNAMIC_INPUT": InputKind.DYNAMIC}
_OUTPUTS = {"OUTPUT": OutputKind.REQUIRED, "DYNAMIC_OUTPUT": OutputKind.DYNAMIC}
_REG_OP = re.compile(r'"""\s*REG_OP\((\w+)\)(.*?)"""', re.S)
_ITEM = re.compile(r"\.(INPUT|OPTIONAL_INPUT|DYNAMIC_INPUT|OUTPUT|DYNAMIC_OUTPUT|ATTR|REQUIRED_ATTR)\((\w+),\s*(\w+)?")
_UNKNOWN_RANK = -2  # ge::UNKNOWN_RANK as a ListInt default: the shape [-2]


class UnparsedDefault(ValueError):
    pass


def reg_op_texts(text: str) -> list[tuple[str, str]]:
    """(GE op type, its whole `REG_OP(...)` docstring) for each in `text`, in order, unparsed."""
    return [(match.group(1), match.group(0)) for match in _REG_OP.finditer(text)]


def parse_reg_ops(text: str, dtype_numbers: Mapping[str, int] | None = None) -> dict[str, IrPrototype]:
    """GE op type -> prototype, for every `REG_OP(...)` docstring in `text`.

    dtype_numbers: ge::DataType enumerator name -> number (`DT_FLOAT` -> 0), for defaults such as
    `.ATTR(dtype, Type, DT_INT32)`; without it such defaults stay unknown. A default this parser
    cannot read is left unknown, never guessed: a kernel then needs the node to carry the attr.
    """
    prototypes = {}
    for op_type, body in _REG_OP.findall(text):
        inputs, outputs, attrs, defaults = [], [], [], []
        for item in _ITEM.finditer(body):
            kind, name, type_name = item.groups()
            if kind in _INPUTS:
                inputs.append((name, _INPUTS[kind]))
            elif kind in _OUTPUTS:
                outputs.append((name, _OUTPUTS[kind]))
            elif type_name in _ATTR_TYPES:
                attr_type = _ATTR_TYPES[type_name]
                attrs.append((name, attr_type))
                if kind == "REQUIRED_ATTR":
                    defaults.append((name, REQUIRED))
                else:
                    try:
                        default_text = _rest_of_item(body, item.end())
                        defaults.append((name, parse_default(default_text, attr_type, dtype_numbers or {})))
                    except UnparsedDefault:
                        pass
        try:
            prototypes[op_type] = IrPrototype(op_type, tuple(inputs), tuple(outputs), tuple(attrs), tuple(defaults))
        except ValueError:
            continue  # a few generated entries list a name twice; no shipped mapping uses them
    return prototypes


def _rest_of_item(body: str, start: int) -> str:
    """What follows `.ATTR(name, Type` up to the item's closing parenthesis: `, default`."""
    line = body[start:].split("\\n", 1)[0].split("\n", 1)[0].rstrip()
    if not line.startswith(",") or not line.endswith(")"):
        raise UnparsedDefault(line)
    return line[1:-1]


def parse_default(text: str, attr_type: AttrType, dtype_numbers: Mapping[str, int]):
    """One REG_OP default written as C++ (`0.00001`, `1e-5f`, `{1 1 1 1}`, `"NHWC"`, `DT_INT32`) as a
    Python value; lists come back as tuples. Raises UnparsedDefault for anything else."""
    text = text.strip()
    scalar = {
        AttrType.INT: lambda t: _int(t, dtype_numbers), AttrType.FLOAT: _float, AttrType.BOOL: _bool,
        AttrType.STRING: _string, AttrType.DATA_TYPE: lambda t: _dtype(t, dtype_numbers),
    }
    element = {
        AttrType.LIST_INT: scalar[AttrType.INT], AttrType.LIST_FLOAT: _float, AttrType.LIST_BOOL: _bool,
        AttrType.LIST_STRING: _string, AttrType.LIST_DATA_TYPE: scalar[AttrType.DATA_TYPE],
    }
    if attr_type in scalar:
        return scalar[attr_type](text)
    if attr_type is AttrType.LIST_INT and text == "ge::UNKNOWN_RANK":
        return (_UNKNOWN_RANK,)
    if attr_type in element:
        return tuple(element[attr_type](item) for item in _braces(text))
    if attr_type in (AttrType.LIST_LIST_INT, AttrType.LIST_LIST_FLOAT):
        inner = _int if attr_type is AttrType.LIST_LIST_INT else _float
        body = _strip_braces(text)
        groups = re.findall(r"\{[^{}]*\}", body)
        if re.sub(r"\{[^{}]*\}|[\s,]", "", body):
            raise UnparsedDefault(text)
        return tuple(tuple(inner(item) if inner is _float else inner(item, dtype_numbers) for item in _braces(g))
                     for g in groups)
    raise UnparsedDefault(text)


def _strip_braces(text: str) -> str:
    if not (text.startswith("{") and text.endswith("}")):
        raise UnparsedDefault(text)
    return text[1:-1].strip()


def _braces(text: str) -> list[str]:
    body = _strip_braces(text)
    return [item for item in re.split(r"[\s,]+", body) if item]


def _int(text: str, dtype_numbers: Mapping[str, int]) -> int:
    if text.startswith("DT_"):
        return _dtype(text, dtype_numbers)
    try:
        return int(text)
    except ValueError:
        raise UnparsedDefault(text) from None


def _float(text: str) -> float:
    try:
        return float(text[:-1] if text.endswith(("f", "F")) and not text.lower().endswith("inf") else text)
    except ValueError:
        raise UnparsedDefault(text) from None


def _bool(text: str) -> bool:
    if text in ("true", "false"):
        return text == "true"
    raise UnparsedDefault(text)


def _string(text: str) -> str:
    match = re.fullmatch(r'"((?:[^"\\]|\\.)*)"' + "|'((?:[^'\\\\]|\\\\.)*)'", text)
    if match is None:
        raise UnparsedDefault(text)
    value = match.group(1) if match.group(1) is not None else match.group(2)
    if "\\" in value:
        raise UnparsedDefault(text)  # no escapes occur in CANN's defaults; refuse rather than guess
    return value


def _dtype(text: str, dtype_numbers: Mapping[str, int]) -> int:
    name = text.removeprefix("ge::")
    if name not in dtype_numbers:
        raise UnparsedDefault(text)
    return dtype_numbers[name]


def parse_dtype_enum(header_text: str) -> dict[str, int]:
    """`DT_X` -> number from CANN's `graph/c_types.h` (`C_DT_FLOAT = 0, ...`)."""
    return {f"DT_{name}": int(number) for name, number in re.findall(r"\bC_DT_(\w+)\s*=\s*(\d+)", header_text)}
