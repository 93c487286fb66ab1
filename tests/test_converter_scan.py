"""The converter scan of issue 34, kept as a test: every TorchAir converter parameter that its body never
reads (an argument the graph silently drops: `_fft_c2c`'s `forward`, `npu_rotary_mul`'s mode) must be
classified below with what op_plugin does about it, and every op_plugin correction named here must exist.
A TorchAir update that adds such a parameter fails here, naming it, before a model computes another op
than its user wrote (docs/npu-faithful-lowering.md, "The converter scan").

Read statically from TorchAir's converter sources in the unpacked wheel (ast: parameters of functions
registered with `register_fx_node_ge_converter`, as decorator or as a call, minus the names their body
reads); converters whose body is a single `raise` are left out (they refuse everything).
"""
from __future__ import annotations

import ast

import pytest

from op_plugin._base import wheel

ROOT = wheel.torchair_parent(wheel.simulator_dir()) / "torchair" / "_ge_concrete_graph" / "ge_converter"
pytestmark = pytest.mark.skipif(not ROOT.is_dir(), reason="the torch-npu wheel is not unpacked (make setup)")

# Placement and allocation hints with one meaning in a GE graph (memory is GE's), on every converter.
PLACEMENT = {"device", "pin_memory", "layout", "non_blocking", "memory_format", "meta_outputs", "out"}

CORRECTED = "corrected or refused by name by an op_plugin correction (when='corrects') on both hosts"
DTYPE_VIA_META = "read through the node's output dtype (`dtype_promote(self, meta_outputs.dtype)`)"
INERT = "inert: gradient-only, derivable from the inputs, or dropout-only (keep_prob 1)"

# target -> (unread parameters, status)
KNOWN: dict[str, tuple[set[str], str]] = {
    "aten._fft_c2c.default": ({"forward"}, CORRECTED),
    "aten._log_softmax.default": ({"half_to_float"}, DTYPE_VIA_META),
    "aten.sum.default": ({"dtype"}, DTYPE_VIA_META),
    "aten.sum.dim_IntList": ({"dtype"}, DTYPE_VIA_META),
    "aten.empty.memory_format": ({"dtype"}, DTYPE_VIA_META),
    "aten.gelu.default": ({"approximate"}, CORRECTED),
    "aten.upsample_nearest2d.default": ({"scales_h", "scales_w"}, CORRECTED),
    "aten.upsample_nearest2d_backward.default": ({"output_size", "scales_h", "scales_w"}, CORRECTED),
    "aten.batch_norm_backward_reduce.default": ({"weight"}, INERT + " (the gradients do not depend on weight)"),
    "aten.embedding.default": ({"padding_idx"}, INERT),
    "aten.gather.default": ({"sparse_grad"}, INERT),
    "npu.npu_gather_backward.default": ({"sparse_grad"}, INERT),
    "aten.grid_sampler_2d_backward.default": ({"output_mask"}, INERT),
    "aten.leaky_relu_backward.default": ({"self_is_result"}, INERT),
    "aten.log_sigmoid_backward.default": ({"buffer"}, INERT),
    "aten.log_sigmoid_backward.grad_input": ({"buffer"}, INERT),
    "aten.native_group_norm.default": ({"N", "HxW"}, INERT),
    "aten.native_layer_norm_backward.default": ({"bias", "output_mask"}, INERT),
    "npu.npu_fusion_attention.default": ({"pse", "gen_mask_parallel", "sync"}, CORRECTED),
    "npu.npu_fusion_attention_grad.default": ({"pse", "seed", "offset", "numels", "gen_mask_parallel", "sync"},
                                              CORRECTED),
    "npu.npu_incre_flash_attention.default": ({"padding_mask"}, CORRECTED),
    "npu.npu_prompt_flash_attention.default": ({"padding_mask"}, CORRECTED),
    "npu.npu_grouped_matmul.default": ({"activation_input", "activation_quant_scale", "activation_quant_offset"},
                                       CORRECTED),
    "npu.npu_grouped_matmul.List": ({"activation_input", "activation_quant_scale", "activation_quant_offset"},
                                    CORRECTED),
    "npu.npu_add_quant_gmm.default": ({"group_sizes"}, CORRECTED),
    "npu.npu_add_quant_gmm_.default": ({"group_sizes"}, CORRECTED),
    "npu.npu_all_to_all_quant_matmul.default": ({"output_scale_dtype", "comm_scale_dtype"}, CORRECTED),
    "npu.npu_quant_matmul_all_to_all.default": ({"output_scale_dtype", "comm_scale_dtype"}, CORRECTED),
    "npu.npu_fused_infer_attention_score_v2.default": (
        {"query_rope_dtype", "key_rope_dtype", "key_shared_prefix_dtype", "value_shared_prefix_dtype",
         "dequant_scale_key_rope_dtype"},
        CORRECTED),
    "npu.npu_moe_distribute_combine.default": (
        {"shared_expert_x"}, "reserved in torch_npu v1; the wheel's Meta has no such parameter, so tracing refuses it"),
    "npu_define._send.default": ({"shape"}, "TorchAir's own op: shape is its Meta's, the GE op sends the tensor"),
}
# Converters only TorchAir's export loads (`enable_lite_export`; dynamo_export is refused on a CPU host).
EXPORT_ONLY = {"lite/quantmatmul_lite.py"}


def _target(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == \
            "register_fx_node_ge_converter" and node.args:
        return ast.unparse(node.args[0]).removeprefix("torch.ops.")
    return None


def _refuses_everything(fn: ast.FunctionDef) -> bool:
    body = [b for b in fn.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
    return len(body) == 1 and isinstance(body[0], ast.Raise)


def _unread(fn: ast.FunctionDef) -> set[str]:
    read = {n.id for statement in fn.body for n in ast.walk(statement) if isinstance(n, ast.Name)}
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    return params - read - PLACEMENT - {"self"}


def _schema_arguments(target: str) -> set[str] | None:
    """The op's schema argument names (a converter parameter no schema has is never passed by a node:
    TorchAir's helper defaults such as npu_quant_matmul's transpose_x1), or None for an op not defined here."""
    import torch

    parts = target.split(".")
    if len(parts) != 3:  # a target held in a variable
        return None
    namespace, name, overload = parts
    try:
        op = getattr(getattr(getattr(torch.ops, namespace), name), overload)
    except (AttributeError, RuntimeError):
        return None
    return {a.name for a in op._schema.arguments}


def scan() -> dict[str, set[str]]:
    """target -> the schema arguments its converter never reads (only targets with some)."""
    import op_plugin  # noqa: F401  (defines torch_npu's ops from the wheel's schemas)

    found: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        if str(path.relative_to(ROOT)) in EXPORT_ONLY:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        every = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        functions = {fn.name: fn for fn in every}  # the last definition of a name, as Python binds it
        pairs = [(t, fn) for fn in every for d in fn.decorator_list if (t := _target(d))]
        # `gmm_reg = register_fx_node_ge_converter(op)(fn)`
        pairs += [(t, functions[c.args[0].id]) for c in ast.walk(tree)
                  if isinstance(c, ast.Call) and (t := _target(c.func)) and c.args
                  and isinstance(c.args[0], ast.Name) and c.args[0].id in functions]
        for target, fn in pairs:
            if _refuses_everything(fn):
                continue
            schema = _schema_arguments(target)
            if unread := {p for p in _unread(fn) if schema is None or p in schema}:
                found.setdefault(target, set()).update(unread)
    return found


def test_every_argument_torchair_drops_is_classified():
    found = scan()
    new = {t: sorted(p - KNOWN.get(t, (set(), ""))[0]) for t, p in found.items() if p - KNOWN.get(t, (set(), ""))[0]}
    assert not new, (f"TorchAir converters that never read these arguments: {new}. Decide for each whether the "
                     "graph computes another op than eager when it is given; correct or refuse it by name in "
                     "op_plugin/_lowering (reserved_argument_corrections.py is the pattern) and classify it in KNOWN")
    stale = {t: sorted(p - found.get(t, set())) for t, (p, _) in KNOWN.items() if p - found.get(t, set())}
    assert not stale, f"KNOWN lists arguments TorchAir's converters now read (or no longer have): {stale}"


def test_each_corrected_finding_has_an_op_plugin_correction():
    import torch

    import op_plugin._lowering  # noqa: F401  (declares the corrections)
    from op_plugin._lowering import registry

    corrected: set[str] = set()
    for entry in registry.entries("corrects"):
        for op in entry.targets:
            name = op if isinstance(op, str) else str(op)
            name = name.replace("::", ".")
            corrected.add(name if name.count(".") == 2 else f"{name}.default")
    torch.ops.npu  # noqa: B018  (the npu namespace the string targets name)
    missing = [t for t, (_, status) in KNOWN.items() if status.startswith(CORRECTED) and t not in corrected]
    assert not missing, f"classified as corrected but no op_plugin correction targets them: {missing}"
