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
(`"DT_INT8"`, GE's numbering; `type` attrs), a string as the escaped body of a C++ literal (msOpGen
pastes it between quotes), non-finite floats refused.

`format` and `type` pair up position by position, and position k of every input and output
together is one supported dtype combination ("the types of input_desc and output_desc correspond
vertically"). The combinations come from the YAML `dtypes:` rule: tensor arguments that accept
the same set of dtypes are taken to share one dtype (like x1/x2 of Add), arguments with different
sets vary independently, and each output takes the dtype its `outputs:` rule gives it; a ScalarType
argument that gives an output its dtype varies over the dtypes the YAML lets it name.

One op that cannot be written is reported (`MsOpGenResult.errors`, located) and the others are
written all the same; so is a second op on a GE type, or on its file name (`MyOp` and `MyOP`).

Why this module is over 400 lines: the JSON's every field follows from one YAML entry through rules that
read each other (dtype combinations decide formats, attr types decide default rendering); one module keeps
the rules and the msOpGen references they come from together.
"""
from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..._ge.ir import AttrType, InputKind
from ..._ge.values import TORCH_TO_GE_NAME
from ..._simulator.hosting.builtin_types import builtin_ge_types
from ..._spec.dtypes import DTYPES, schema_default_dtype
from ..._spec.ge_prototype import ge_outputs
from ..._spec.model import OpSpec
from ..._spec.schema import ArgKind
from .cpp_text import cpp_string_body
from .out_files import write_files

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
# The body of a C++ string literal as `cpp_string_body` writes it: printable ASCII other than
# " \ ?, and the escapes \\ \" \? \n \r \t \ooo. msOpGen pastes a string default between quotes.
_STRING_BODY = r'(?:[ !#->@-\[\]-~]|\\[\\"?nrt]|\\[0-7]{3})*'
# The C++ text msOpGen pastes for each attr type's default (list defaults are brace initialisers).
_DEFAULT_FORMS = {
    "string": _STRING_BODY,
    "list_int": r"\{\s*([-+]?\d+(\s*,\s*[-+]?\d+)*)?\s*\}",
    "list_float": rf"\{{\s*({_NUMBER}(\s*,\s*{_NUMBER})*)?\s*\}}",
    "list_bool": r"\{\s*((true|false)(\s*,\s*(true|false))*)?\s*\}",
    "list_type": r"\{\s*(DT_[A-Z0-9]+(\s*,\s*DT_[A-Z0-9]+)*)?\s*\}",
    "list_list_int": r"\{\s*(\{[-+\d,\s]*\}(\s*,\s*\{[-+\d,\s]*\})*)?\s*\}",
    "list_string": rf'\{{\s*("{_STRING_BODY}"(\s*,\s*"{_STRING_BODY}")*)?\s*\}}',
}
FORMAT = "ND"
_DEFAULT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_DTYPE_ORDER = list(DTYPES.values())
# At most this many dtype combinations (msOpGen columns) per op: each is a kernel variant to build,
# and independent dtype sets multiply (twenty arguments with two dtypes each would be a million).
MAX_COLUMNS = 1024
INT64_MIN = -(1 << 63)


class MsOpGenError(ValueError):
    """An op whose msOpGen JSON cannot be written; the message starts with its YAML location."""


@dataclass
class MsOpGenResult:
    ops: list[dict] = field(default_factory=list)                 # the msOpGen JSON objects, one per op
    sources: list[OpSpec] = field(default_factory=list)           # the YAML op of each entry of `ops`
    builtin: list[tuple[OpSpec, str]] = field(default_factory=list)   # ops mapped onto a CANN built-in
    no_ge: list[OpSpec] = field(default_factory=list)             # ops without a `ge:` mapping
    notes: list[str] = field(default_factory=list)                # assumptions made, per op
    errors: list[tuple[OpSpec, str]] = field(default_factory=list)  # ops not generated, and why (located)


def msopgen_ops(specs, builtin_types: set[str] | None = None) -> MsOpGenResult:
    """msOpGen JSON objects for the ops among `specs` whose GE type is not a CANN built-in.

    An op that cannot be generated does not stop the others: it is listed in `errors`, its message
    starting with its YAML location. So is a second op on a GE type already generated, or on a type
    whose file name (`<snake_case type>.json`) another type already takes (MyOp and MyOP)."""
    builtin_types = builtin_ge_types() if builtin_types is None else builtin_types
    result = MsOpGenResult()
    stems = FileStems("json")
    for spec in specs:
        if spec.ge is None:
            result.no_ge.append(spec)
        elif spec.ge.type in builtin_types:
            result.builtin.append((spec, spec.ge.type))
        else:
            notes: list[str] = []
            try:
                stems.claim(spec)
                entry = op_json(spec, notes)
            except MsOpGenError as error:
                result.errors.append((spec, str(error)))
                continue
            stems.keep(spec)
            result.notes += notes
            result.ops.append(entry)
            result.sources.append(spec)
    return result


class FileStems:
    """The file stem of each generated GE type (`snake_case`), refusing a second claim on a stem
    (two types differing in case, or one type generated twice) and the stems in `reserved`."""

    def __init__(self, kind: str, reserved: dict[str, str] | None = None):
        self.kind = kind
        self.reserved = reserved or {}
        self.owners: dict[str, OpSpec] = {}

    def claim(self, spec: OpSpec) -> str:
        stem = snake_case(spec.ge.type)
        where = spec.field("ge.type")
        owner = self.owners.get(stem)
        if owner is not None and owner.ge.type == spec.ge.type:
            raise MsOpGenError(f"{where}: GE type {spec.ge.type} is already generated from {owner.qualname} "
                               f"({owner.location.file_line}); a custom GE type belongs to one op: give this op "
                               "its own `ge.type`")
        if owner is not None:
            raise MsOpGenError(f"{where}: GE type {spec.ge.type} would be written to {stem}.{self.kind}, the file of "
                               f"GE type {owner.ge.type} ({owner.qualname}, {owner.location.file_line}); the file "
                               "names are the snake_case of the types: rename one `ge.type`")
        if stem in self.reserved:
            raise MsOpGenError(f"{where}: GE type {spec.ge.type} would be written to {stem}.{self.kind}, "
                               f"{self.reserved[stem]}; choose another `ge.type`")
        return stem

    def keep(self, spec: OpSpec) -> None:
        self.owners[snake_case(spec.ge.type)] = spec


def op_json(spec: OpSpec, notes: list[str] | None = None) -> dict:
    """The msOpGen JSON object of one op with a `ge:` mapping (MsOpGenError, located, if it has none)."""
    notes = [] if notes is None else notes
    ge = spec.ge
    if ge is None:
        raise MsOpGenError(f"{spec.field('ge')}: {spec.qualname} has no `ge:` mapping, so there is no GE op to "
                           "generate")
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
               for name, dtypes in zip(list(ge.outputs) + refs, output_dtypes, strict=True)]
    entry = {"op": ge.type, "input_desc": inputs, "output_desc": outputs}
    attrs = [attr_json(spec, attr, notes) for attr in ge.attrs]
    if attrs:
        entry["attr"] = attrs
    try:
        check_msopgen_json([entry])
    except ValueError as error:  # a gap in this generator: still said at the op's line
        raise MsOpGenError(f"{spec.field('ge')}: {error}") from error
    return entry


def allowed_dtypes(spec: OpSpec, arg: str, notes: list[str] | None = None) -> tuple[torch.dtype, ...]:
    """The dtypes tensor argument `arg` accepts: its `dtypes:` rule, else the dtypes its samples
    use, else the float types (said in `notes`)."""
    notes = [] if notes is None else notes
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
    return _ordered(rule)


def scalar_type_choices(spec: OpSpec, arg: str) -> tuple[torch.dtype, ...]:
    """The dtypes a ScalarType argument that gives an output dtype may name, as far as the YAML
    bounds them: every dtype its tensor arguments accept (`dtypes:`), its default and its samples."""
    choices = {d for a in spec.schema.tensor_args for d in allowed_dtypes(spec, a.name)}
    default = _schema_default(spec, arg)
    if default is not None:
        choices.add(schema_default_dtype(default))
    for sample in spec.samples:
        value = dict(sample.values).get(arg)
        if isinstance(value, str) and value in DTYPES:
            choices.add(DTYPES[value])
    return _ordered(choices or set(_DEFAULT_DTYPES))


def _ordered(dtypes) -> tuple[torch.dtype, ...]:
    return tuple(sorted(dtypes, key=_DTYPE_ORDER.index))


def dtype_columns(spec: OpSpec, notes: list[str] | None = None) -> list[dict[str, torch.dtype]]:
    """The supported dtype combinations: one dict argument -> dtype per msOpGen column.

    Tensor arguments with the same accepted set share a dtype; different sets vary independently.
    A ScalarType argument that gives an output its dtype varies too, over `scalar_type_choices`:
    msOpGen's JSON ties every output dtype to a column, so each dtype it may name is a column (as
    CANN's own Cast lists one per source and destination dtype). At most MAX_COLUMNS columns."""
    notes = [] if notes is None else notes
    groups: dict[tuple, list[str]] = {}
    for arg in spec.schema.tensor_args:
        groups.setdefault(allowed_dtypes(spec, arg.name, notes), []).append(arg.name)
    axes = [(dtypes, names) for dtypes, names in groups.items()]
    for arg in _scalar_type_sources(spec):
        choices = scalar_type_choices(spec, arg)
        notes.append(f"{spec.qualname}: an output dtype comes from the ScalarType argument '{arg}'; one column per "
                     f"dtype it may name ({', '.join(MSOPGEN_DTYPES[d] for d in choices)}: the op's `dtypes:`, "
                     "its default and samples)")
        axes.append((choices, [arg]))
    count = math.prod(len(dtypes) for dtypes, _ in axes)
    if count > MAX_COLUMNS:
        sizes = " x ".join(f"{len(dtypes)} ({', '.join(names)})" for dtypes, names in axes)
        raise MsOpGenError(f"{spec.field('dtypes')}: {count} dtype combinations ({sizes}); msOpGen gets one column "
                           f"per combination, and more than {MAX_COLUMNS} is refused: give arguments that share a "
                           "dtype the same `dtypes:` list, or fewer dtypes")
    return [{name: dtype for dtype, (_, names) in zip(combo, axes, strict=True) for name in names}
            for combo in itertools.product(*(dtypes for dtypes, _ in axes))]


def _scalar_type_sources(spec: OpSpec) -> list[str]:
    """The ScalarType arguments that give an output its dtype, in schema order."""
    named = {rule.dtype_from_arg for rule in spec.outputs or () if rule.dtype_from_arg is not None}
    return [a.name for a in spec.schema.args if a.kind is ArgKind.SCALAR_TYPE and a.name in named]


def _output_dtypes(spec: OpSpec, columns, notes: list[str]) -> list[list[torch.dtype]]:
    result = []
    first_tensor = spec.schema.tensor_args[0].name if spec.schema.tensor_args else None
    for i in range(len(spec.schema.returns)):
        rule = spec.outputs[i] if spec.outputs is not None else None
        if rule is not None and rule.dtype is not None:
            result.append([rule.dtype] * len(columns))
            continue
        source = (rule.dtype_from_arg or rule.same_as) if rule is not None else None
        if source is None:
            if first_tensor is None:
                raise MsOpGenError(f"{spec.field('outputs')}: cannot tell the dtype of output {i} (no `outputs:` "
                                   "rule and no tensor argument)")
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


def attr_default(spec: OpSpec, attr) -> tuple[bool, object]:
    """(has a default, the default): an argument's schema default (a ScalarType as its torch.dtype),
    or the constant the converter always sets. A None default (or a length attr) has none."""
    if attr.arg is not None:
        arg = spec.schema.arg(attr.arg)
        default = _schema_default(spec, attr.arg) if arg.has_default else None
        if default is None:
            return False, None
        return True, schema_default_dtype(default) if arg.kind is ArgKind.SCALAR_TYPE else default
    if attr.length_of is None:
        return True, attr.const
    return False, None


def attr_json(spec: OpSpec, attr, notes: list[str]) -> dict:
    kind = MSOPGEN_ATTR_TYPES.get(attr.value_type)
    if kind is None:
        raise MsOpGenError(f"{spec.field('ge.attrs')}: GE attr '{attr.ge_name}' of type {attr.value_type.value} has "
                           "no msOpGen type")
    entry = {"name": attr.ge_name, "param_type": "required", "type": kind}
    if kind in ("type", "list_type"):
        notes.append(f"{spec.qualname}: attr '{attr.ge_name}' is a ge::DataType ({kind}), as TorchAir sets it; "
                     "the GE prototype (REG_OP) takes it, but Ascend C's OpAttrDef has no Type setter, so an "
                     "Ascend C (-lan cpp) project needs that attr declared by hand")
    has_default, default = attr_default(spec, attr)
    if attr.arg is not None and spec.schema.arg(attr.arg).has_default and not has_default:
        notes.append(f"{spec.qualname}: attr '{attr.ge_name}' defaults to None in the schema; "
                     "GE attrs cannot be None, so it is written as required")
    if has_default:
        entry.update(param_type="optional", default_value=_default_value(spec, attr, kind, default))
        if INT64_MIN in (default if isinstance(default, (list, tuple)) else [default]) and kind in ("int", "list_int"):
            notes.append(f"{spec.qualname}: attr '{attr.ge_name}' defaults to {INT64_MIN}, which msOpGen pastes as "
                         "that literal: g++ warns that it is too large for a signed integer (an error under "
                         "-Werror); the prototype from `op-plugin opproto` writes it as (-9223372036854775807 - 1)")
    return entry


def _default_value(spec: OpSpec, attr, kind: str, value):
    """`value` in the form msOpGen pastes into C++ for an attr of msOpGen type `kind`."""
    def scalar(item):
        if kind in ("float", "list_float"):
            item = float(item)
            if not math.isfinite(item):
                raise MsOpGenError(f"{spec.field('ge.attrs')}: attr '{attr.ge_name}' defaults to {item}, which has no "
                                   "C++ literal in an msOpGen prototype (msOpGen pastes the number as text); give a "
                                   "finite default, or write this op's JSON by hand")
            return item
        if kind in ("type", "list_type"):
            return TORCH_TO_GE_NAME[item]
        if kind in ("string", "list_string"):
            return cpp_string_body(item)  # msOpGen pastes it between quotes into C++
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
            return f'"{item}"'
        return repr(item) if isinstance(item, float) else str(item)

    return text(list(value))


def _check_default(where: str, kind: str, value) -> None:
    scalar_types = {"int": int, "float": (int, float), "bool": bool, "type": str}
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
                         "(lists are C++ brace initialisers such as \"{1, 2}\"; a type is a ge::DataType name; a "
                         "string is the body of a C++ string literal, escaped)")


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


def write_jsons(result: MsOpGenResult, out_dir: str | Path, replace: bool = True) -> list[Path]:
    """One `<snake_case GE type>.json` per op (msOpGen creates one project per `gen -i`), written
    without following links, replacing existing files only when `replace` (`out_files.write_files`);
    OSError names the path that failed."""
    files = {f"{snake_case(entry['op'])}.json": dumps([entry]) + "\n" for entry in result.ops}
    if len(files) != len(result.ops):  # msopgen_ops refuses a second op on a file name
        raise ValueError("two msOpGen entries share a file name")
    return write_files(out_dir, files, replace)


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
