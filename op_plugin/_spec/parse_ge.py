"""The fields that map a YAML op onto Ascend: `ge:` (GE type, inputs, attrs and outputs, checked
against the schema) and `aclnn:` (the eager NPU kernel's aclnn API and library)."""
from __future__ import annotations

import math
import re

from typing import Any

from .._ge.ir import AttrType, InputKind
from .cann_names import MAX_GE_TYPE_LENGTH, RESERVED_GE_TYPES, ge_name_problem
from .model import GE_ATTR_TYPES, AclnnSpec, GeAttr, GeInput, GeSpec, default_ge_type
from .op_parser import IDENTIFIER, OpParser
from .schema import ArgKind, Schema

_GE_TYPE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
# A GE Float attr is a C float (REG_OP's OpFloat, TorchAir's ge.attr.Float): float32.
FLOAT32_MAX = 3.4028234663852886e38
_ACLNN_FUNCTION = re.compile(r"^aclnn[A-Z][A-Za-z0-9]*$")
_LIBRARY = re.compile(r"^[^\x00\n]*\.so(\.[0-9]+)*$")


def parse_aclnn(p: OpParser, raw: Any) -> AclnnSpec:
    if not isinstance(raw, dict):
        raise p.fail(("aclnn",), "aclnn", "expected a mapping {function: aclnnX, library: libX.so}")
    for key in raw:
        if key not in ("function", "library"):
            raise p.fail(("aclnn", key), f"aclnn.{key}", f"unknown field '{key}'; allowed: function, library")
    function, library = raw.get("function"), raw.get("library")
    if not isinstance(function, str) or not _ACLNN_FUNCTION.match(function):
        raise p.fail(("aclnn", "function"), "aclnn.function",
                     f"{function!r} is not an aclnn API name "
                     "(aclnn followed by the CamelCase op, e.g. aclnnAddCustom); "
                     "op_plugin calls <function>GetWorkspaceSize, then <function>")
    if not isinstance(library, str) or not _LIBRARY.match(library):
        raise p.fail(("aclnn", "library"), "aclnn.library",
                     f"{library!r} is not a shared library (a file name such as libcust_opapi.so, or a path to one)")
    return AclnnSpec(function, library)


def parse_ge(p: OpParser, schema: Schema, raw: Any) -> GeSpec:
    if not isinstance(raw, dict):
        raise p.fail(("ge",), "ge", "expected a mapping with type/inputs/attrs/outputs")
    for key in raw:
        if key not in ("type", "inputs", "attrs", "outputs"):
            raise p.fail(("ge", key), f"ge.{key}", f"unknown field '{key}'; allowed: type, inputs, attrs, outputs")
    ge_type = raw.get("type", default_ge_type(schema.name))
    _check_ge_type(p, ge_type)
    inputs = _parse_ge_inputs(p, schema, raw.get("inputs"))
    attrs = _parse_ge_attrs(p, schema, raw.get("attrs"))
    # An aliased return (in-place op) is a GE "ref" output: it has the name of the mutated input.
    ref_names = [next((i.ge_name for i in inputs if i.arg == schema.aliased_arg(r).name), None)
                 if r.alias_set else None for r in schema.returns]
    outputs = raw.get("outputs")
    if outputs is None:
        plain = ["y"] if len(schema.returns) == 1 else [f"y{i}" for i in range(len(schema.returns))]
        outputs = [ref or name for ref, name in zip(ref_names, plain, strict=True)]
    if not isinstance(outputs, list) or not all(isinstance(o, str) and IDENTIFIER.match(o) for o in outputs):
        raise p.fail(("ge", "outputs"), "ge.outputs", "expected a list of GE output names")
    for name in outputs:
        if ge_name_problem(name):
            raise p.fail(("ge", "outputs"), "ge.outputs", ge_name_problem(name))
    if len(outputs) != len(schema.returns):
        raise p.fail(("ge", "outputs"), "ge.outputs",
                     f"the schema returns {len(schema.returns)} tensor(s) but ge.outputs names {len(outputs)}")
    for i, (ref, name) in enumerate(zip(ref_names, outputs, strict=True)):
        if ref is not None and name != ref:
            raise p.fail(("ge", "outputs"), "ge.outputs", f"return {i} is the mutated input '{ref}', so its GE "
                         f"output must be the ref output '{ref}', not '{name}'")
    names = ([(i.ge_name, ("ge", "inputs"), "ge.inputs") for i in inputs]
             + [(a.ge_name, ("ge", "attrs", a.ge_name), "ge.attrs") for a in attrs]
             + [(o, ("ge", "outputs"), "ge.outputs") for o, ref in zip(outputs, ref_names, strict=True) if ref is None])
    _check_unique(p, names)
    _check_dynamic_expansion(p, inputs, names)
    return GeSpec(ge_type, inputs, attrs, tuple(outputs))


def _check_ge_type(p: OpParser, ge_type: Any) -> None:
    """A GE type becomes a C++ class name (`REG_OP(Type)` in namespace ge::op) and a file name."""
    if not isinstance(ge_type, str) or not _GE_TYPE.match(ge_type):
        raise p.fail(("ge", "type"), "ge.type", f"{_short(ge_type)} is not a GE op type (CamelCase identifier)")
    if len(ge_type) > MAX_GE_TYPE_LENGTH:
        raise p.fail(("ge", "type"), "ge.type", f"the GE op type {_short(ge_type)} has {len(ge_type)} characters; "
                     f"at most {MAX_GE_TYPE_LENGTH} (it names the generated files)")
    if ge_type in RESERVED_GE_TYPES:
        raise p.fail(("ge", "type"), "ge.type", f"'{ge_type}' is a name the CANN graph headers (or the C and C++ "
                     "headers they include) already use, as a class, function or macro; REG_OP(" + ge_type + ") "
                     "would not compile. Choose another `ge.type`")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    if len(text) <= limit:
        return text
    return text[: limit - 4] + ("...'" if isinstance(value, str) else "...")


def _check_dynamic_expansion(p: OpParser, inputs: tuple[GeInput, ...], names: list[tuple[str, tuple, str]]) -> None:
    """GE names the parts of a dynamic input `x` as x0, x1, ...: no other name may look like one."""
    for dynamic in (i.ge_name for i in inputs if i.kind is InputKind.DYNAMIC):
        expansion = re.compile(rf"^{re.escape(dynamic)}\d+$")
        for name, sub, field in names:
            if expansion.match(name):
                raise p.fail(sub, field, f"GE name '{name}' collides with the parts of dynamic input '{dynamic}' "
                             f"({dynamic}0, {dynamic}1, ...); rename one of them")


def _named_pairs(p: OpParser, sub: tuple, field: str, raw: Any) -> list[tuple[str, str, tuple]]:
    """`[a, {ge_name: b}]` or `{ge_name: arg}` -> [(ge_name, arg, path)]."""
    if isinstance(raw, dict):
        return [(k, v, sub + (k,)) for k, v in raw.items()]
    if not isinstance(raw, list):
        raise p.fail(sub, field, "expected a list of argument names (or `ge_name: argument` pairs)")
    pairs = []
    for i, item in enumerate(raw):
        if isinstance(item, str):
            pairs.append((item, item, sub + (i,)))
        elif isinstance(item, dict) and len(item) == 1:
            (ge_name, arg), = item.items()
            pairs.append((ge_name, arg, sub + (i,)))
        else:
            raise p.fail(sub + (i,), f"{field}[{i}]", "expected an argument name or `ge_name: argument`")
    return pairs


def _mapping_pairs(p: OpParser, raw: Any, field: str, default_args) -> list[tuple[str, Any, tuple]]:
    """The (ge_name, source, path) pairs of ge.inputs / ge.attrs; by default the args themselves."""
    if raw is None:
        return [(a.name, a.name, ("ge",)) for a in default_args]
    return _named_pairs(p, ("ge", field), f"ge.{field}", raw)


def _parse_ge_inputs(p: OpParser, schema: Schema, raw: Any) -> tuple[GeInput, ...]:
    result = []
    for ge_name, arg_name, sub in _mapping_pairs(p, raw, "inputs", schema.tensor_args):
        if not isinstance(ge_name, str) or not IDENTIFIER.match(ge_name):
            # the name is written into generated C++ (REG_OP, infer functions) and msOpGen JSON
            raise p.fail(sub, "ge.inputs", f"{_short(ge_name)} is not a valid GE input name (a C identifier: "
                         "letters, digits and _, not starting with a digit)")
        if ge_name_problem(ge_name):
            raise p.fail(sub, "ge.inputs", ge_name_problem(ge_name))
        arg = schema.arg(arg_name) if isinstance(arg_name, str) else None
        if arg is None or not arg.kind.is_tensor:
            what = ("not an argument of the op" if arg is None
                    else f"of type {arg.kind.value}, not a tensor (GE attrs go in ge.attrs)")
            raise p.fail(sub, "ge.inputs", f"'{arg_name}' is {what}")
        kind = {ArgKind.OPTIONAL_TENSOR: InputKind.OPTIONAL, ArgKind.TENSOR_LIST: InputKind.DYNAMIC}.get(
            arg.kind, InputKind.REQUIRED)
        result.append(GeInput(ge_name, arg_name, kind))
    missing = [a.name for a in schema.tensor_args if a.name not in {i.arg for i in result}]
    if missing:
        raise p.fail(("ge", "inputs"), "ge.inputs",
                     f"tensor argument(s) {', '.join(missing)} are not mapped to a GE input")
    return tuple(result)


def _const_attr_type(value: Any) -> AttrType | None:
    scalar = {bool: AttrType.BOOL, int: AttrType.INT, float: AttrType.FLOAT, str: AttrType.STRING}
    if type(value) in scalar:
        return scalar[type(value)]
    if isinstance(value, list) and value:
        kinds = {type(v) for v in value}
        if len(kinds) == 1 and kinds <= {bool, int, float}:
            return {bool: AttrType.LIST_BOOL, int: AttrType.LIST_INT, float: AttrType.LIST_FLOAT}[kinds.pop()]
    return None


def _parse_ge_attrs(p: OpParser, schema: Schema, raw: Any) -> tuple[GeAttr, ...]:
    result = []
    for ge_name, source, sub in _mapping_pairs(p, raw, "attrs", schema.non_tensor_args):
        if not isinstance(ge_name, str) or not IDENTIFIER.match(ge_name):
            raise p.fail(sub, "ge.attrs", f"{_short(ge_name)} is not a valid GE attr name")
        if ge_name_problem(ge_name):
            raise p.fail(sub, "ge.attrs", ge_name_problem(ge_name))
        if isinstance(source, dict):
            result.append(_parse_special_attr(p, schema, sub, ge_name, source))
            continue
        arg = schema.arg(source) if isinstance(source, str) else None
        if arg is None:
            raise p.fail(sub, "ge.attrs", f"'{source}' is not an argument of the op; an attr is an argument name, "
                         "{value: <constant>} or {len: <Tensor[] argument>}")
        if arg.symbolic:
            raise p.fail(sub, "ge.attrs", f"argument '{source}' is a SymInt, which is symbolic under dynamic shapes, "
                         "but a GE attr is a compile-time constant; declare it `int` (dynamo then compiles "
                         "once per value) or pass the size in a tensor argument")
        value_type = GE_ATTR_TYPES.get(arg.kind)
        if value_type is None:
            raise p.fail(sub, "ge.attrs", f"argument '{source}' is of type {arg.kind.value}; GE attrs take "
                         "int, float, bool, str, int[], float[], bool[], ScalarType or Scalar arguments")
        problem = _value_problem(value_type, _schema_default(schema, source))
        if problem:
            raise p.fail(sub, "ge.attrs", f"argument '{source}' defaults to {problem}")
        result.append(GeAttr(ge_name, value_type, arg=source))
    mapped = {a.arg for a in result}
    for arg in schema.non_tensor_args:
        if arg.name not in mapped and not arg.has_default:
            raise p.fail(("ge", "attrs"), "ge.attrs", f"argument '{arg.name}' has no default and is not mapped to a "
                         "GE attr, so the GE op could not receive its value; map it (e.g. "
                         f"`{arg.name}: {arg.name}`) or give it a default in `func:`")
    return tuple(result)


def _parse_special_attr(p: OpParser, schema: Schema, sub: tuple, ge_name: str, source: dict) -> GeAttr:
    if set(source) == {"value"}:
        value_type = _const_attr_type(source["value"])
        if value_type is None:
            raise p.fail(sub, "ge.attrs", f"constant {_short(source['value'])} for '{ge_name}' must be a bool, int, "
                         "float, str or a non-empty list of one of bool/int/float")
        problem = _value_problem(value_type, source["value"])
        if problem:
            raise p.fail(sub, "ge.attrs", f"constant for '{ge_name}': {problem}")
        return GeAttr(ge_name, value_type, const=source["value"])
    if set(source) == {"len"}:
        arg = schema.arg(source["len"]) if isinstance(source["len"], str) else None
        if arg is None or arg.kind is not ArgKind.TENSOR_LIST:
            raise p.fail(sub, "ge.attrs", f"{{len: {source['len']}}} needs a Tensor[] argument")
        return GeAttr(ge_name, AttrType.INT, length_of=source["len"])
    raise p.fail(sub, "ge.attrs", f"attr '{ge_name}' must be an argument name, {{value: <constant>}} "
                 "or {len: <Tensor[] argument>}")


def _schema_default(schema: Schema, name: str) -> Any:
    for argument in schema.torch_schema.arguments:
        if argument.name == name:
            return argument.default_value
    return None


def _value_problem(value_type: AttrType, value: Any) -> str | None:
    """Why a GE attr of `value_type` cannot hold `value` (a constant or a schema default), or None.

    GE attrs are int64 (Int), float32 (Float) and C strings (String): a value outside them would
    change on its way into the GE graph or the generated prototype."""
    items = value if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if value_type in (AttrType.INT, AttrType.LIST_INT) and type(item) is int and not INT64_MIN <= item <= INT64_MAX:
            return f"{_short(item)}, which does not fit a GE Int attr (int64: {INT64_MIN} to {INT64_MAX})"
        if (value_type in (AttrType.FLOAT, AttrType.LIST_FLOAT) and isinstance(item, (int, float))
                and not isinstance(item, bool) and (isinstance(item, int) or math.isfinite(item))
                and abs(item) > FLOAT32_MAX):
            return (f"{_short(item)}, which does not fit a GE Float attr (float32: at most {FLOAT32_MAX:.8g} in "
                    "magnitude; GE would receive inf)")
        if value_type is AttrType.STRING and isinstance(item, str) and "\0" in item:
            return (f"{_short(item)}, which contains a NUL character; GE string attrs are C strings and would "
                    "end there")
    return None


def _check_unique(p: OpParser, names: list[tuple[str, tuple, str]]) -> None:
    """GE input, attr and output names share one namespace in the IR prototype."""
    seen = set()
    for name, sub, field in names:
        if name in seen:
            raise p.fail(sub, field, f"GE name '{name}' is used twice")
        seen.add(name)


