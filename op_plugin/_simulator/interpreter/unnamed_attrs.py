"""Attrs a GE node carries that its kernel's REG_OP prototype does not name: accepted by rule, or refused.

The binder passes a kernel the attrs its prototype names. An attr outside the prototype never reaches
the kernel, so a node asking for something the kernel does not do (DynamicMxQuant's `blocksize` read as
32 while the prototype spelt it `block_size`) would silently compute something else. `check` refuses
such an attr, naming the node, its type, the attr and its value, unless

* its name starts with "_": TorchAir's bookkeeping (`_input_name_key`, `_inference_rule`,
  `_force_unknown_shape`, `_inputs_all_sym`, ...), which describes the graph, not the computation;
* it is one of `TORCHAIR_NODE_ATTRS`: attrs TorchAir writes on nodes of many types whose content
  reaches the graph another way;
* it is one of `TORCHAIR_SCOPE_ATTRS`: attrs a `torchair.scope` writes on the nodes made inside it that
  select what a run reports (`torchair.scope.data_dump()`'s `torchair_enable_data_dump`), not what a
  node computes;
* it is in `INERT_ATTRS` for the node's type: proven not to change the result, with the source;
* it is in `NEWER_DEFAULTS` for the node's type (an attr of a newer REG_OP than the wheel's header,
  not bound by the kernel) and its value is that REG_OP's documented default.

An attr the kernel should honour belongs in its prototype instead (`ge_kernel(prototype=...)` from
CANN's REG_OP text, as matmul.py and quantize_mx.py do), where the signature test holds it to a
parameter or a `layout_only` reason.

Measurement: with $OP_PLUGIN_RECORD_UNNAMED_ATTRS=<file>, every bound node appends one JSON line per
attr its prototype does not name ({"type", "attr", "value"}), accepted or not; a file, so that the
worker processes of `op-plugin declared-cases` record too.
"""
from __future__ import annotations

import json
import os
from typing import NamedTuple

from ..._ge.ir import IrPrototype
from .errors import GeExecutionError

BOOKKEEPING_PREFIX = "_"
RECORD_ENV = "OP_PLUGIN_RECORD_UNNAMED_ATTRS"

_LAYOUT_INFO = ("TorchAir's specific_op_{}_layout (_ge_concrete_graph/utils.py) lists (index, layout) pairs here; "
                "_normalize_ge_graph (fx2ge_converter.py) copies each layout onto that {} desc's `layout` before "
                "the graph runs, and kernels read layouts from the descs")
# Attrs TorchAir writes on nodes of any type, outside every REG_OP: name -> where their content goes.
TORCHAIR_NODE_ATTRS: dict[str, str] = {
    "input_layout_info": _LAYOUT_INFO.format("input", "input"),
    "output_layout_info": _LAYOUT_INFO.format("output", "output"),
}

# Attrs torchair.scope writes on every node made inside a scope that select what the run reports, not what a
# node computes: name -> who reads it. torchair.scope.data_dump() (torchair/scope/__init__.py) writes
# ("torchair_enable_data_dump", "True"); TorchAir's _set_dump_options_json (_ge_concrete_graph/fx2ge_converter.py)
# reads it to add the node to the dump's layer list (dump_options_*.json, handed to AclmdlSetDump).
TORCHAIR_SCOPE_ATTRS: dict[str, str] = {
    "torchair_enable_data_dump": "the node's membership of a torchair.scope.data_dump() scope: TorchAir's "
                                 "_set_dump_options_json (fx2ge_converter.py) adds such nodes to the data dump's "
                                 "layer list; what is dumped, not what the node computes",
}


class NewerDefault(NamedTuple):
    """An attr of a newer REG_OP than the wheel's header: accepted at `default` only."""

    default: object
    source: str  # the REG_OP text it is documented in


# GE type -> {attr: why it cannot change the result, with the source}. Measured over the simulator's
# GE-kernel, npu-op and zoo tests and TorchAir's declared cases (brief H7): TorchAir's builders write no
# attr that needs an entry (TopKV2's sort_policy, the one attr of no wheel prototype they write, is bound
# through ops-math's REG_OP in kernels/sort.py). The entries are for graphs built by hand.
INERT_ATTRS: dict[str, dict[str, str]] = {
    "LogSoftmaxV2": {
        # SoftmaxV2 has half_to_float; a node of LogSoftmaxV2 given it anyway (as torch's _log_softmax
        # argument) is computed in the input dtype on the NPU too.
        "half_to_float": "no REG_OP of LogSoftmaxV2 has it (the wheel's header, and ops-nn "
                         "activation/log_softmax_v2/op_graph/log_softmax_v2_proto.h: attr axes only), so no "
                         "NPU kernel reads it",
    },
}

# GE type -> {attr: NewerDefault}: attrs that a newer REG_OP than the wheel's header adds, where the
# kernel computes what the documented default asks for and nothing else.
NEWER_DEFAULTS: dict[str, dict[str, NewerDefault]] = {
    # true: an empty axes list reduces nothing, as the ReduceSum kernel does (kernels/reduce.py); false
    # reduces every axis on Ascend950 and later and is ignored before, a choice of chip the simulator
    # does not make, so false is refused.
    "ReduceSum": {"noop_with_empty_axes": NewerDefault(
        True, "ops-math math/reduce_sum/op_graph/reduce_sum_proto.h: .ATTR(noop_with_empty_axes, Bool, true), "
              "valid only for Ascend950 AI Processors and later")},
}


def accepted(op_type: str, name: str, value) -> bool:
    """Whether an attr the prototype of `op_type` does not name may be left unread."""
    if name.startswith(BOOKKEEPING_PREFIX) or name in TORCHAIR_NODE_ATTRS or name in TORCHAIR_SCOPE_ATTRS:
        return True
    if name in INERT_ATTRS.get(op_type, {}):
        return True
    newer = NEWER_DEFAULTS.get(op_type, {}).get(name)
    return newer is not None and _same(value, newer.default)


def check(op, prototype: IrPrototype, attrs: dict, where: str) -> None:
    """Raise GeExecutionError for the first attr of `attrs` that `prototype` does not name and no rule
    accepts (`where` names the node and its type)."""
    named = {param.name for param in prototype.attrs}
    unnamed = [(name, value) for name, value in attrs.items() if name not in named]
    if not unnamed:
        return
    _record(op.type, unnamed)
    for name, value in unnamed:
        if accepted(op.type, name, value):
            continue
        newer = NEWER_DEFAULTS.get(op.type, {}).get(name)
        if newer is not None:
            raise GeExecutionError(
                f"{where} carries attr {name!r} = {value!r}; the simulator implements only its default "
                f"{newer.default!r} ({newer.source}). Bind that REG_OP as the kernel's prototype and honour "
                f"the attr to run this node")
        raise GeExecutionError(
            f"{where} carries attr {name!r} = {value!r}, which {op.type}'s prototype does not name (its attrs: "
            f"{sorted(named)}), so the kernel would ignore it and could return a wrong result. Declare the "
            f"attr in the kernel's prototype (from CANN's REG_OP text) and honour it, or list it in "
            f"unnamed_attrs.INERT_ATTRS with the source proving it cannot change the result")


def _same(value, default) -> bool:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return list(value) == list(default)
    return type(value) is type(default) and value == default or (
        isinstance(value, (int, float)) and not isinstance(value, bool)
        and isinstance(default, (int, float)) and not isinstance(default, bool) and value == default)


def _record(op_type: str, unnamed: list) -> None:
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as out:
        out.writelines(json.dumps({"type": op_type, "attr": name, "value": repr(value)[:80]}) + "\n"
                       for name, value in unnamed)


__all__ = ["BOOKKEEPING_PREFIX", "INERT_ATTRS", "NEWER_DEFAULTS", "RECORD_ENV", "TORCHAIR_NODE_ATTRS",
           "TORCHAIR_SCOPE_ATTRS", "NewerDefault", "accepted", "check"]
