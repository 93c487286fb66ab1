"""torch_npu's own operator schemas and Meta functions, read from the unpacked torch-npu wheel.

Nothing here imports torch_npu. Two files of the wheel are read as text:

* ``csrc/aten/npu_native_functions_by_codegen.yaml``: the entries of its ``custom:`` section are
  the ``torch.ops.npu.*`` operators; ``schema_entries`` returns the ``func:`` schema string and
  ``tags:`` of the requested names (only the default overload, the name without a dot).
* ``op_plugin/meta/_meta_registrations.py``: torch_npu's Meta functions in Python. The module as a
  whole cannot be imported on a CPU host (it imports ``torch_npu`` and asks the NPU for the CANN
  and SoC versions), so it is **parsed, not imported**: ``meta_functions`` takes from its syntax
  tree the function registered with ``@impl(m, "<op>")`` for each requested op, plus the module-
  level helpers and constants it refers to (transitively), and compiles just those in a private
  namespace with the wheel's file name (tracebacks point at the wheel's lines). Top-level
  ``if "2.1." in torch.__version__:`` blocks are resolved against the running torch.
  The names of torch_npu a picked function may use get stand-ins here (``_STAND_INS``):
  ``ops_error``/``ErrCode`` (error-message suffixes) and, from ``torch_npu_standin`` (the one
  CPU-host stand-in, which TorchAir's converters get too), ``get_soc_version`` (returns -1, "no
  Ascend SoC": the Ascend950-only compile warning of npu_fusion_attention stays off),
  ``get_cann_version`` (the CANN the simulator stands for, ``SIMULATED_CANN_VERSION``) and the
  module ``torch_npu`` itself (its dtype constants ``int4``, ``hifloat8``, ``float8_*``,
  ``float4_*`` and the CANN version query). Any other name imported from torch_npu is refused with
  an error naming the op; a name the wheel's
  module never defines at all (a bug of the wheel, e.g. ``out_dtype`` in
  ``npu_quant_fusion_attention_backward``) is left as it is there: a NameError when that line runs.
"""
from __future__ import annotations

import ast
import builtins
import copy
import dataclasses
import functools
import hashlib
import importlib.util
import marshal
import math
import os
import re
import types
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from . import torch_npu_standin as standin, wheel_cache
from .registered_schemas import registered_schemas
from .torch_npu_standin import SIMULATED_CANN_VERSION, TORCH_NPU_DTYPES  # noqa: F401  (this module's API too)

CODEGEN_YAML = "csrc/aten/npu_native_functions_by_codegen.yaml"
META_MODULE = "op_plugin/meta/_meta_registrations.py"


class WheelOpUnavailable(RuntimeError):
    """The wheel has no usable schema or Meta function for a requested torch_npu op."""


@dataclass(frozen=True)
class SchemaEntry:
    name: str
    schema: str               # "npu_rms_norm(Tensor self, ...) -> (Tensor, Tensor)"
    tags: tuple[str, ...]


def schema_entries(wheel_root: Path, names) -> dict[str, SchemaEntry]:
    """The ``custom:`` entries of the codegen YAML for `names` (default overloads only)."""
    wanted = set(names)
    found = {name: entry for name, entry in all_schema_entries(wheel_root).items() if name in wanted}
    missing = sorted(wanted - set(found))
    if missing:
        raise WheelOpUnavailable(f"{CODEGEN_YAML} has no custom: entry for {', '.join(missing)}")
    return found


def all_schema_entries(wheel_root: Path) -> dict[str, SchemaEntry]:
    """Every ``custom:`` entry of the codegen YAML, overloads included ("npu_grouped_matmul.List"),
    in the file's order: the operators torch_npu defines in the ``npu`` namespace, each with the schema
    string torch_npu's library registers for it where the wheel ships the library (`registered_schemas`:
    ``Tensor input`` for the YAML's ``Tensor self``, ``Tensor[] out`` for a multi-output ``.out``)."""
    registered = registered_schemas(wheel_root)
    return {name: dataclasses.replace(entry, schema=registered[name]) if name in registered else entry
            for name, entry in _all_schema_entries(str(wheel_root))}


@functools.lru_cache(maxsize=4)
def _all_schema_entries(wheel_root: str) -> tuple[tuple[str, SchemaEntry], ...]:
    text = (Path(wheel_root) / CODEGEN_YAML).read_text()
    # One safe load of the section, with libyaml's loader where PyYAML has it (10x faster: this runs in
    # every process that defines the ops)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    found: list[tuple[str, SchemaEntry]] = []
    for entry in yaml.load(_top_level_section(text, "custom"), Loader=loader) or ():  # a safe loader
        match = re.match(r"\s*([\w.]+)\(", str(entry.get("func", ""))) if isinstance(entry, dict) else None
        if not match:
            continue
        tags = entry.get("tags") or ()
        found.append((match.group(1), SchemaEntry(match.group(1), entry["func"],
                                                  tuple([tags] if isinstance(tags, str) else tags))))
    return tuple(found)


def _top_level_section(text: str, key: str) -> str:
    match = re.search(rf"^{key}:\n(.*?)(?=^\w+:|\Z)", text, re.S | re.M)
    if not match:
        raise WheelOpUnavailable(f"{CODEGEN_YAML} has no top-level {key}: section")
    return match.group(1)


def _ops_error(*_args, **_kwargs) -> str:
    return ""  # torch_npu appends an error-code suffix; the message itself is kept


class _ErrCode:
    def __getattr__(self, name):
        return name


# The torch_npu names a picked Meta function may use, with their CPU-host stand-ins.
_STAND_INS = {"ops_error": _ops_error, "ErrCode": _ErrCode(), "get_soc_version": standin.get_soc_version,
              "get_cann_version": standin.get_cann_version, "torch_npu": standin.TORCH_NPU}
_PROVIDED = {"torch": torch, "math": math, "os": os, "warnings": warnings, **_STAND_INS}


def meta_functions(wheel_root: Path, names=None) -> dict[str, object]:
    """The wheel's Meta function of each op in `names` (None: every op it registers one for, keyed
    by op name with overload), compiled without torch_npu.

    Parsing the wheel's module takes ~0.2 s, so the compiled picks are cached beside the wheel
    (`_CACHE_DIR`), keyed by the module's bytes, the names, Python's bytecode magic and this
    parser's version. A cache file is only executed when it carries this user's HMAC over its key
    and contents (the secret lives in the user's own cache folder, `_secret`), so a file someone
    else put there is never run; a cache that is unreadable, unauthenticated, malformed or does not
    define the functions it names is stale: rebuilt from the wheel's source and rewritten."""
    names = None if names is None else list(names)
    path = Path(wheel_root) / META_MODULE
    raw = path.read_bytes()
    listed = "*" if names is None else ",".join(names)
    key = hashlib.sha256(b"|".join([raw, listed.encode(), importlib.util.MAGIC_NUMBER,
                                    _CACHE_VERSION.encode(), torch.__version__.encode()])).hexdigest()[:32]
    cache = Path(wheel_root) / _CACHE_DIR / f"meta-{key}.bin"
    secret = _secret()
    picked = _read_cache(cache, key, secret) if secret is not None else None
    functions = _load(picked, names) if picked is not None else None
    if functions is None:
        picked = _pick_meta_functions(path, raw.decode(), names)
        functions = _run(picked, list(picked[1]))  # the wheel's own failures propagate, as they are
        if secret is not None:
            _write_cache(cache, key, secret, picked)
    return functions


def _run(picked, names) -> dict[str, object]:
    """Run the picked definitions in a private namespace; {op name: its Meta function}."""
    code, function_names = picked
    namespace = {"__name__": __name__ + ".wheel_meta", **_PROVIDED}
    exec(code, namespace)  # the pinned wheel's own code, parsed here or authenticated
    return {name: namespace[function_names[name]] for name in names}


def _load(picked, names) -> dict[str, object] | None:
    """`_run` on a cached pick: None (stale) unless it runs and every name is a function."""
    if names is None:
        names = list(picked[1])
    try:
        functions = _run(picked, names)
    except Exception:  # a stale cache: the caller rebuilds it
        return None
    return functions if all(callable(f) for f in functions.values()) else None


_CACHE_DIR = wheel_cache.CACHE_DIR
_CACHE_VERSION = "3"
_MAGIC = wheel_cache.MAGIC
_secret = wheel_cache.secret  # this user's HMAC key (None: no cache is trusted or written)
_mac = wheel_cache.mac


def _read_cache(path: Path, key: str, secret: bytes):
    """The authenticated (code, {op: function name}) of a cache file, or None."""
    payload = wheel_cache.read(path, key, secret)
    if payload is None:
        return None  # not written by this user for this key: never unmarshalled, never run
    try:
        code, function_names = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    if not isinstance(code, types.CodeType) or not isinstance(function_names, dict):
        return None
    return code, function_names


def _write_cache(path: Path, key: str, secret: bytes, picked) -> None:
    wheel_cache.write(path, key, secret, marshal.dumps(picked))


def _pick_meta_functions(path: Path, source: str, names) -> tuple:
    """(code object, {op name: function name}) of the picked definitions, compiled with the
    wheel's file name and line numbers."""
    body = _resolve_version_branches(ast.parse(source, str(path)).body)
    definitions = _module_definitions(body)
    imported = {alias.asname or alias.name.split(".")[0] for node in body
                 if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    registered = _registered_meta(body)
    if names is None:
        names = list(registered)
    picked: list[ast.stmt] = []
    for name in names:
        if name not in registered:
            raise WheelOpUnavailable(f"{META_MODULE} registers no Meta function for npu::{name}")
        _collect(registered[name], definitions, picked, name, seen=set(), imported=imported)
    order = {id(node): i for i, node in enumerate(body)}
    picked.sort(key=lambda node: order[id(node)])
    module = ast.Module(body=[_undecorated(node) for node in picked], type_ignores=[])
    return compile(module, str(path), "exec"), {name: registered[name].name for name in names}


def _resolve_version_branches(body):
    """Keep the branch of top-level ``if "<ver>" in torch.__version__`` blocks that holds here."""
    out = []
    for node in body:
        if isinstance(node, ast.If):
            holds = _torch_version_test(node.test)
            if holds is None:
                continue  # some other top-level condition: its definitions are not picked
            out.extend(_resolve_version_branches(node.body if holds else node.orelse))
        else:
            out.append(node)
    return out


def _torch_version_test(test):
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.In, ast.NotIn))
            and isinstance(test.left, ast.Constant) and isinstance(test.left.value, str)
            and ast.unparse(test.comparators[0]) == "torch.__version__"):
        inside = test.left.value in torch.__version__
        return inside if isinstance(test.ops[0], ast.In) else not inside
    return None


def _module_definitions(body) -> dict[str, ast.stmt]:
    defs: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    defs[target.id] = node
    return defs


def _registered_meta(body) -> dict[str, ast.FunctionDef]:
    registered = {}
    for node in body:
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                if (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Name) and deco.func.id == "impl"
                        and len(deco.args) >= 2 and isinstance(deco.args[0], ast.Name) and deco.args[0].id == "m"
                        and isinstance(deco.args[1], ast.Constant)):
                    registered[deco.args[1].value] = node
    return registered


def _collect(node, definitions, picked, op, seen, imported=frozenset()):
    if id(node) in seen:
        return
    seen.add(id(node))
    if all(node is not p for p in picked):
        picked.append(node)
    for used in _free_names(node):
        if used in _PROVIDED or hasattr(builtins, used):
            continue
        if used in definitions:
            _collect(definitions[used], definitions, picked, op, seen, imported)
        elif used in imported:
            raise WheelOpUnavailable(
                f"the wheel's Meta function for npu::{op} uses {used!r}, which needs torch_npu on an NPU host")
        # else: the wheel's module never binds the name (its own bug): a NameError when reached, as there


def _free_names(node) -> set[str]:
    """Names a definition loads (decorators excluded), minus its own parameters and locals.

    Only what Python evaluates counts: the annotation of a local variable inside a function
    (``LAYOUT_MAP: Dict[str, ParserLayout] = ...``) is never evaluated, so ``Dict`` is no free
    name; the names a nested ``def``/``class`` binds (``class ParserLayout``, ``def check_...``)
    are locals of the enclosing function."""
    loaded, stored = set(), set()

    def visit(sub, in_function):
        if isinstance(sub, ast.Name):
            (loaded if isinstance(sub.ctx, ast.Load) else stored).add(sub.id)
            return
        if isinstance(sub, ast.arg):
            stored.add(sub.arg)
            if sub.annotation is not None:
                visit(sub.annotation, in_function)
            return
        if isinstance(sub, ast.Global):
            loaded.update(sub.names)
            return
        if isinstance(sub, ast.AnnAssign) and in_function:
            visit(sub.target, in_function)  # the annotation of a local is never evaluated
            if sub.value is not None:
                visit(sub.value, in_function)
            return
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and sub is not node:
            stored.add(sub.name)
        inner = in_function or isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(sub):
            if sub is node and isinstance(node, (ast.FunctionDef, ast.ClassDef)) and child in node.decorator_list:
                continue
            visit(child, inner)

    visit(node, False)
    if isinstance(node, ast.FunctionDef):
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            loaded.update(n.id for n in ast.walk(default) if isinstance(n, ast.Name))
    globals_declared = {n for sub in ast.walk(node) if isinstance(sub, ast.Global) for n in sub.names}
    return loaded - (stored - globals_declared)


def _undecorated(node):
    if isinstance(node, ast.FunctionDef) and node.decorator_list:
        node = copy.copy(node)  # the parsed tree is private, but keep each pick independent
        node.decorator_list = []
    return node
