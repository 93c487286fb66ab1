"""`op-plugin msopgen`: the msOpGen JSON for the Ascend C operator project of each custom GE op.

A YAML op whose `ge:` type is not a CANN built-in needs an Ascend C kernel on the NPU. Ascend's
msOpGen tool creates that kernel's project from an operator prototype JSON
(`msopgen gen -i OP.json -f pytorch -c ai_core-<soc> -lan cpp -out DIR`); this module writes that
JSON from the same YAML entry, so the IR the converter emits and the kernel's prototype agree.

The format (CANN / MindStudio "msOpGen: create an operator project", table "json file parameters"):

    [{"op": "<GE type>",
      "input_desc":  [{"name", "param_type": required|optional|dynamic, "format": [...], "type": [...]}],
      "output_desc": [{"name", "param_type": "required", "format": [...], "type": [...]}],
      "attr":        [{"name", "param_type": required|optional, "type": int|float|bool|string|list_int|...,
                       "default_value": ...}]}]

Attribute defaults are written the way msOpGen's generators need them to become valid C++ (read
from MindStudio msopgen's `op_file.py` / `op_file_aicore.py`: the default is pasted as text into
`.ATTR(x, ListInt, <default>)` and `this->Attr("x").AttrType(OPTIONAL).ListInt(<default>)`): lists as
brace-initialiser strings (`"{1, 0}"`, `"{true, false}"`), a ScalarType as its ge::DataType name
(`"DT_INT8"`, GE's numbering; `type` attrs), non-finite floats refused.

`format` and `type` pair up position by position, and position k of every input and output
together is one supported dtype combination ("the types of input_desc and output_desc correspond
vertically"). The combinations come from the YAML `dtypes:` rule: tensor arguments that accept
the same set of dtypes are taken to share one dtype (like x1/x2 of Add), arguments with different
sets vary independently, and each output takes the dtype its `outputs:` rule gives it.
"""
from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .._ge.ir import AttrType, InputKind
from .._ge.values import TORCH_TO_GE_NAME
from .._simulator.hosting.builtin_types import builtin_ge_types
from .._spec.dtypes import DTYPES, schema_default_dtype
from .._spec.ge_prototype import ge_outputs
from .._spec.model import OpSpec
from .._spec.schema import ArgKind

# torch dtype -> msOpGen `type` name (float32 is "float" and float64 "double" in msOpGen's list).
MSOPGEN_DTYPES = {
    torch.float16: "float16", torch.float32: "float", torch.bfloat16: "bfloat16", torch.float64: "double",
    torch.int8: "int8", torch.int16: "int16", torch.int32: "int32", torch.int64: "int64",
    torch.uint8: "uint8", torch.bool: "bool",
}
# GE attr value type (as GeAttr carries it) -> msOpGen attr `type`.
MSOPGEN_ATTR_TYPES = {
    AttrType.INT: "int", AttrType.FLOAT: "float", AttrType.BOOL: "bool", AttrType.STRING: "string",
    AttrType.LIST_INT: "list_int", AttrType.LIST_FLOAT: "list_float", AttrType.LIST_BOOL: "list_bool",
    AttrType.LIST_STRING: "list_string", AttrType.LIST_LIST_INT: "list_list_int",
    AttrType.DATA_TYPE: "type", AttrType.LIST_DATA_TYPE: "list_type",  # ge::DataType, GE's numbering
}
PARAM_TYPES = tuple(kind.value for kind in InputKind)
ATTR_PARAM_TYPES = ("required", "optional")
# msOpGen's IR_ATTR_TYPE_MAP (config/transform.json), less tensor attrs, which YAML cannot express.
ATTR_TYPES = ("int", "float", "bool", "string", "type", "list_int", "list_float", "list_bool", "list_string",
              "list_type", "list_list_int")
_GE_DTYPE_NAMES = frozenset(TORCH_TO_GE_NAME.values())
_NUMBER = r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?"
# The C++ text msOpGen pastes for each attr type's default (list defaults are brace initialisers).
_DEFAULT_FORMS = {
    "list_int": rf"\{{\s*([-+]?\d+(\s*,\s*[-+]?\d+)*)?\s*\}}",
    "list_float": rf"\{{\s*({_NUMBER}(\s*,\s*{_NUMBER})*)?\s*\}}",
    "list_bool": r"\{\s*((true|false)(\s*,\s*(true|false))*)?\s*\}",
    "list_type": r"\{\s*(DT_[A-Z0-9]+(\s*,\s*DT_[A-Z0-9]+)*)?\s*\}",
    "list_list_int": r"\{\s*(\{[-+\d,\s]*\}(\s*,\s*\{[-+\d,\s]*\})*)?\s*\}",
    "list_string": r'\{\s*("[^"\\]*"(\s*,\s*"[^"\\]*")*)?\s*\}',
}
FORMAT = "ND"
_DEFAULT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_DTYPE_ORDER = list(DTYPES.values())


@dataclass
class MsOpGenResult:
    ops: list[dict] = field(default_factory=list)                 # the msOpGen JSON objects, one per op
    sources: list[OpSpec] = field(default_factory=list)           # the YAML op of each entry of `ops`
    builtin: list[tuple[OpSpec, str]] = field(default_factory=list)   # ops mapped onto a CANN built-in
    no_ge: list[OpSpec] = field(default_factory=list)             # ops without a `ge:` mapping
    notes: list[str] = field(default_factory=list)                # assumptions made, per op


def msopgen_ops(specs, builtin_types: set[str] | None = None) -> MsOpGenResult:
    """msOpGen JSON objects for the ops among `specs` whose GE type is not a CANN built-in."""
    builtin_types = builtin_ge_types() if builtin_types is None else builtin_types
    result = MsOpGenResult()
    seen: dict[str, OpSpec] = {}
    for spec in specs:
        if spec.ge is None:
            result.no_ge.append(spec)
        elif spec.ge.type in builtin_types:
            result.builtin.append((spec, spec.ge.type))
        elif spec.ge.type in seen:
            result.notes.append(f"{spec.qualname}: GE type {spec.ge.type} is already generated from "
                                f"{seen[spec.ge.type].qualname}; kept the first")
        else:
            seen[spec.ge.type] = spec
            result.ops.append(op_json(spec, result.notes))
            result.sources.append(spec)
    return result


def op_json(spec: OpSpec, notes: list[str] | None = None) -> dict:
    """The msOpGen JSON object of one op with a `ge:` mapping."""
    notes = [] if notes is None else notes
    ge = spec.ge
    if ge is None:
        raise ValueError(f"{spec.qualname} has no `ge:` mapping, so there is no GE op to generate")
    columns = dtype_columns(spec, notes)
    output_dtypes = _output_dtypes(spec, columns, notes)
    formats = [FORMAT] * len(columns)
    inputs = [{"name": i.ge_name, "param_type": i.kind.value, "format": list(formats),
               "type": [MSOPGEN_DTYPES[c[i.arg]] for c in columns]} for i in ge.inputs]
    # Ref outputs (mutated inputs not returned) follow the returns, in the IR prototype's order,
    # with their input's dtypes: GE writes the result back into that input.
    arg_of = {i.ge_name: i.arg for i in ge.inputs}
    refs = ge_outputs(spec)[len(ge.outputs):]
    output_dtypes = list(output_dtypes) + [[column[arg_of[name]] for column in columns] for name in refs]
    outputs = [{"name": name, "param_type": "required", "format": list(formats),
                "type": [MSOPGEN_DTYPES[d] for d in dtypes]}
               for name, dtypes in zip(list(ge.outputs) + refs, output_dtypes)]
    entry = {"op": ge.type, "input_desc": inputs, "output_desc": outputs}
    attrs = [attr_json(spec, attr, notes) for attr in ge.attrs]
    if attrs:
        entry["attr"] = attrs
    check_msopgen_json([entry])
    return entry


def _allowed_dtypes(spec: OpSpec, arg: str, notes: list[str]) -> tuple[torch.dtype, ...]:
    rule = dict(spec.dtypes).get(arg)
    if rule is None:  # no `dtypes:` for this argument: what the samples use, else the float types
        seen = set()
        for sample in spec.samples:
            value = dict(sample.values).get(arg)
            for item in value if isinstance(value, tuple) else (value,):
                if hasattr(item, "dtype"):
                    seen.add(item.dtype)
        rule = seen or set(_DEFAULT_DTYPES)
        notes.append(f"{spec.qualname}: no `dtypes:` for '{arg}'; used "
                     f"{', '.join(MSOPGEN_DTYPES[d] for d in _ordered(rule))} "
                     f"(from {'its samples' if seen else 'the default float types'})")
    unsupported = [d for d in rule if d not in MSOPGEN_DTYPES]
    if unsupported:
        raise ValueError(f"{spec.qualname}: dtype(s) {unsupported} of '{arg}' have no msOpGen type name")
    return _ordered(rule)


def _ordered(dtypes) -> tuple[torch.dtype, ...]:
    return tuple(sorted(dtypes, key=_DTYPE_ORDER.index))


def dtype_columns(spec: OpSpec, notes: list[str] | None = None) -> list[dict[str, torch.dtype]]:
    """The supported dtype combinations: one dict tensor argument -> dtype per msOpGen column.

    Arguments with the same accepted set share a dtype; different sets vary independently."""
    notes = [] if notes is None else notes
    tensor_args = [a.name for a in spec.schema.tensor_args]
    groups: dict[tuple, list[str]] = {}
    for name in tensor_args:
        groups.setdefault(_allowed_dtypes(spec, name, notes), []).append(name)
    columns = []
    for combo in itertools.product(*groups):
        columns.append({name: dtype for dtype, names in zip(combo, groups.values()) for name in names})
    return columns


def _output_dtypes(spec: OpSpec, columns, notes: list[str]) -> list[list[torch.dtype]]:
    result = []
    first_tensor = spec.schema.tensor_args[0].name if spec.schema.tensor_args else None
    for i in range(len(spec.schema.returns)):
        rule = spec.outputs[i] if spec.outputs is not None else None
        if rule is not None and rule.dtype is not None:
            result.append([rule.dtype] * len(columns))
            continue
        source = (rule.dtype_from_arg or rule.same_as) if rule is not None else None
        if source is not None and source not in columns[0]:
            raise ValueError(f"{spec.qualname}: output {i} takes its dtype from the ScalarType argument "
                             f"'{source}'; msOpGen's JSON ties each output dtype to the input dtypes, which "
                             "cannot say that: write this op's msOpGen JSON by hand")
        if source is None:
            if first_tensor is None:
                raise ValueError(f"{spec.qualname}: cannot tell the dtype of output {i} (no `outputs:` rule "
                                 "and no tensor argument)")
            source = first_tensor
            notes.append(f"{spec.qualname}: output {i} has no `outputs:` dtype rule (Meta function); "
                         f"assumed the dtype of '{source}'")
        result.append([column[source] for column in columns])
    return result


def _schema_default(spec: OpSpec, name: str):
    for argument in spec.schema.torch_schema.arguments:
        if argument.name == name:
            return argument.default_value
    return None


def attr_json(spec: OpSpec, attr, notes: list[str]) -> dict:
    kind = MSOPGEN_ATTR_TYPES.get(attr.value_type)
    if kind is None:
        raise ValueError(f"{spec.qualname}: GE attr '{attr.ge_name}' of type {attr.value_type.value} has no msOpGen type")
    entry = {"name": attr.ge_name, "param_type": "required", "type": kind}
    if kind in ("type", "list_type"):
        notes.append(f"{spec.qualname}: attr '{attr.ge_name}' is a ge::DataType ({kind}), as TorchAir sets it; "
                     "the GE prototype (REG_OP) takes it, but Ascend C's OpAttrDef has no Type setter, so an "
                     "Ascend C (-lan cpp) project needs that attr declared by hand")
    if attr.arg is not None:
        arg = spec.schema.arg(attr.arg)
        if arg.has_default:
            default = _schema_default(spec, attr.arg)
            if default is None:
                notes.append(f"{spec.qualname}: attr '{attr.ge_name}' defaults to None in the schema; "
                             "GE attrs cannot be None, so it is written as required")
            else:
                if arg.kind is ArgKind.SCALAR_TYPE:
                    default = schema_default_dtype(default)
                entry.update(param_type="optional", default_value=_default_value(spec, attr, kind, default))
    elif attr.length_of is None:  # a constant the converter always sets: the prototype's default
        entry.update(param_type="optional", default_value=_default_value(spec, attr, kind, attr.const))
    return entry


def _default_value(spec: OpSpec, attr, kind: str, value):
    """`value` in the form msOpGen pastes into C++ for an attr of msOpGen type `kind`."""
    def scalar(item):
        if kind in ("float", "list_float"):
            item = float(item)
            if not math.isfinite(item):
                raise ValueError(f"{spec.qualname}: attr '{attr.ge_name}' defaults to {item}, which has no C++ "
                                 "literal in an msOpGen prototype; give a finite default")
            return item
        if kind in ("type", "list_type"):
            return TORCH_TO_GE_NAME[item]
        return item

    if not kind.startswith("list_"):
        return scalar(value)

    def text(item) -> str:
        if isinstance(item, (list, tuple)):
            return "{" + ", ".join(text(v) for v in item) + "}"
        item = scalar(item)
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, str) and kind == "list_string":
            return json.dumps(item)
        return repr(item) if isinstance(item, float) else str(item)

    return text(list(value))


def _check_default(where: str, kind: str, value) -> None:
    scalar_types = {"int": int, "float": (int, float), "bool": bool, "string": str, "type": str}
    if kind in scalar_types:
        ok = isinstance(value, scalar_types[kind]) and (kind == "bool" or not isinstance(value, bool))
        if kind == "float" and ok:
            ok = math.isfinite(value)
        if kind == "type" and ok:
            ok = value in _GE_DTYPE_NAMES
    else:
        ok = isinstance(value, str) and re.fullmatch(_DEFAULT_FORMS[kind], value) is not None
        if ok and kind == "list_type":
            ok = set(re.findall(r"DT_[A-Z0-9]+", value)) <= _GE_DTYPE_NAMES
    if not ok:
        raise ValueError(f"{where}: default_value {value!r} is not a valid {kind} default for msOpGen "
                         "(lists are C++ brace initialisers such as \"{1, 2}\"; a type is a ge::DataType name)")


def check_msopgen_json(ops: list[dict]) -> None:
    """Raise ValueError where `ops` breaks msOpGen's documented rules (field names and values,
    one entry per dtype combination in every format/type list)."""
    if not isinstance(ops, list):
        raise ValueError("msOpGen JSON is a list of op objects")
    for op in ops:
        name = op.get("op")
        if not isinstance(name, str) or not re.match(r"^[A-Z][A-Za-z0-9]*$", name):
            raise ValueError(f"op {name!r}: the Operator Type must be UpperCamelCase")
        if not op.get("output_desc"):
            raise ValueError(f"{name}: output_desc is required")
        width = None
        for section in ("input_desc", "output_desc"):
            for desc in op.get(section, []):
                where = f"{name}.{section}.{desc.get('name')}"
                if set(desc) != {"name", "param_type", "format", "type"}:
                    raise ValueError(f"{where}: fields must be name, param_type, format, type; got {sorted(desc)}")
                if desc["param_type"] not in PARAM_TYPES:
                    raise ValueError(f"{where}: param_type {desc['param_type']!r} is not one of {PARAM_TYPES}")
                if len(desc["format"]) != len(desc["type"]) or not desc["type"]:
                    raise ValueError(f"{where}: format and type must pair up one to one")
                if width is not None and len(desc["type"]) != width:
                    raise ValueError(f"{where}: {len(desc['type'])} dtype combinations, the op's other "
                                     f"tensors have {width}")
                width = len(desc["type"])
        columns = [tuple(d["type"][k] for s in ("input_desc", "output_desc") for d in op.get(s, []))
                   for k in range(width or 0)]
        if len(set(columns)) != len(columns):
            raise ValueError(f"{name}: a dtype combination is listed twice")
        for attr in op.get("attr", []):
            where = f"{name}.attr.{attr.get('name')}"
            if attr.get("param_type") not in ATTR_PARAM_TYPES or attr.get("type") not in ATTR_TYPES:
                raise ValueError(f"{where}: param_type must be required/optional and type one of {ATTR_TYPES}")
            if attr["param_type"] == "optional" and "default_value" not in attr:
                raise ValueError(f"{where}: an optional attr needs a default_value")
            if "default_value" in attr:
                _check_default(where, attr["type"], attr["default_value"])


def snake_case(ge_type: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", ge_type).lower()


def write_jsons(result: MsOpGenResult, out_dir: str | Path) -> list[Path]:
    """One `<snake_case GE type>.json` per op (msOpGen creates one project per `gen -i`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for entry in result.ops:
        path = out / f"{snake_case(entry['op'])}.json"
        path.write_text(dumps([entry]) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def dumps(ops: list[dict]) -> str:
    """Indented JSON with lists of scalars kept on one line (as in the msOpGen docs)."""

    def fmt(value, depth: int) -> str:
        pad, inner = "    " * depth, "    " * (depth + 1)
        if isinstance(value, dict):
            items = [f"{inner}{json.dumps(k)}: {fmt(v, depth + 1)}" for k, v in value.items()]
            return "{\n" + ",\n".join(items) + f"\n{pad}}}" if items else "{}"
        if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
            return "[\n" + ",\n".join(inner + fmt(v, depth + 1) for v in value) + f"\n{pad}]"
        return json.dumps(value)

    return fmt(ops, 0)
