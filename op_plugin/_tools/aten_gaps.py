"""The page docs/aten-ops-without-converter.md: every aten op an npugraph graph can hold that TorchAir
does not lower, with op_plugin's converter or the reason it is not lowered.

    python -m op_plugin._tools.aten_gaps > docs/aten-ops-without-converter.md

Which ops a graph can hold. TorchAir's backend traces with AOT autograd and applies none of torch's
decomposition tables (`get_npu_default_decompositions` holds two collectives), so a graph is not
limited to core ATen: it holds every aten overload that tracing does not take apart, i.e. one that
is registered with the dispatcher, is not CompositeImplicitAutograd (decomposed while tracing),
is functional (functionalization replaces the mutable and out= overloads), and has a CPU or
CompositeExplicitAutograd kernel (a CPU-host trace cannot produce one without), all read with torch
as TorchAir's backend patches it (`add_npu_patch` drops or replaces some Python decompositions).
Core ATen
membership (`torch.Tag.core`, what export and Inductor normalise to) is shown beside each op.

"TorchAir lowers" means TorchAir's own converter exists and does more than raise
NotImplementedError. tests/test_docs_aten_gaps.py fails when the committed page differs from
`render_page()`.
"""
from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch

REGENERATE = "python -m op_plugin._tools.aten_gaps > docs/aten-ops-without-converter.md"
_TRACED_KERNELS = ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional", "CPU")


@dataclass(frozen=True)
class Gap:
    op: str
    core: bool
    converter: str | None  # op_plugin's converter (module.function), if any
    reason: str | None     # why it is not lowered, when op_plugin has no converter


def graph_ops() -> list[torch._ops.OpOverload]:
    """The aten overloads a CPU-host npugraph graph can hold (module docstring), sorted by name."""
    found = []
    for name in torch.ops.aten:
        packet = getattr(torch.ops.aten, name)
        for overload in packet.overloads():
            op = getattr(packet, overload)
            try:
                implicit = torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
                traced = any(torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key)
                             for key in _TRACED_KERNELS)
            except RuntimeError:
                continue  # a TorchScript-only overload (aten::add.t): not in the dispatcher
            implicit = implicit or torch._C.DispatchKey.CompositeImplicitAutograd in op.py_kernels
            if not implicit and traced and not op._schema.is_mutable:
                found.append(op)
    return sorted(found, key=str)


@functools.cache
def _as_in_a_compile() -> None:
    """Which overloads tracing takes apart depends on the Python decompositions registered as
    CompositeImplicitAutograd py_kernels, which the modules a compile imports add (and replace): read
    them as a user's graph is traced, after one npugraph compile in this process (707 overloads right
    after `import op_plugin`, 800 after a compile, torch 2.13). Not from the compile cache: a hit skips
    TorchAir's lowering and the imports it makes."""
    from .._backend import npugraph_backend

    torch.compile(lambda x: x + 1, backend=npugraph_backend(compile_cache=False))(torch.ones(2))


def _in_torchairs_torch(fn):
    """`fn()` with torch as TorchAir's backend patches it (`add_npu_patch`: Python decompositions
    dropped or replaced), which on a CPU host the simulator swaps in only while TorchAir compiles."""
    import contextlib
    import importlib

    from .._backend import load_torchair

    _as_in_a_compile()
    torchair = load_torchair()
    torchair.get_npu_backend()  # applies (CPU host: records) TorchAir's patches
    compiler = importlib.import_module(f"{torchair.__name__}.npu_fx_compiler")
    patches = getattr(compiler, "_op_plugin_patches", None)
    with patches.active() if patches is not None else contextlib.nullcontext():
        return fn()


def _has(*words: str) -> Callable[[str], bool]:
    pattern = re.compile("|".join(words))
    return lambda name: bool(pattern.search(name))


def _tagged(tag) -> Callable[[torch._ops.OpOverload], bool]:
    return lambda op: tag in op.tags


# (test on the op, reason), first match wins. Every reason is checked against the op's definition,
# its tags or where torch uses it; "not lowered yet" says so plainly.
_BY_OP: list[tuple[Callable[[torch._ops.OpOverload], bool], str]] = [
    (_tagged(torch.Tag.dynamic_output_shape),
     "output shape depends on the data (tag dynamic_output_shape): dynamo graph-breaks before it unless "
     "`torch._dynamo.config.capture_dynamic_output_shape_ops` is set, so a default graph never holds it"),
    (_tagged(torch.Tag.data_dependent_output),
     "returns data to Python (tag data_dependent_output): by default dynamo graph-breaks before it; with "
     "`fullgraph=True` (or `capture_scalar_outputs`) torch 2.13 traces `.item()` / `.tolist()` into the graph "
     "as `_local_scalar_dense` with unbacked values, which TorchAir's GE mode cannot lower, on an Ascend host "
     "alike: read the value outside the compiled function or behind `torch.compiler.disable`"),
    (_tagged(torch.Tag.view_copy),
     "the `_copy` form of a view (tag view_copy): export's core-ATen normalisation produces it; AOT graphs "
     "keep the view itself, which TorchAir lowers"),
    (_tagged(torch.Tag.nondeterministic_seeded),
     "random sampling TorchAir has no converter for (its random converters draw from the NPU generator's "
     "seed and offset for rand, randn, randint, uniform, bernoulli, dropout, randperm and multinomial): "
     "not lowered"),
]
_BY_NAME: list[tuple[Callable[[str], bool], str]] = [
    (_has(r"_scaled_dot_product_flash_attention_for_cpu", r"_weight_norm_interface"),
     "a CPU kernel's decomposition no Ascend host produces: npugraph's NPU-faithful tracing keeps torch_npu's "
     "dispatch (op_plugin/_simulator/npu/dispatch.py, docs/npu-faithful-lowering.md section 1)"),
    (_has(r"mkldnn", r"fbgemm", r"_for_cpu", r"int4pack", r"int8pack", r"_dyn_quant", r"_int_mm", r"_scaled_mm",
          r"quantize", r"quantized", r"_fake_quant", r"_fused_moving_avg", r"_cudnn", r"miopen"),
     "a CPU/GPU library kernel or quantized-tensor op: an Ascend host never traces it (torch_npu's quantized "
     "matmuls are npu ops, docs/torch-npu-ops.md)"),
    (_has(r"sparse", r"nested", r"jagged", r"coalesced", r"dense_dim", r"_to_dense", r"_spdiags"),
     "a sparse or nested tensor layout: a GE tensor is dense, TorchAir has no representation of it"),
    (_has(r"^aten\._assert", r"sym_constrain_range", r"_functional_assert", r"_functional_sym_constrain",
          r"_make_dep_token", r"^aten\._print"),
     "a runtime assertion or effect token: AOT inserts it for unbacked (data-dependent) sizes, which default "
     "graphs do not have (capture options off); not lowered"),
    (_has(r"^aten\._foobar", r"^aten\._test_", r"_efficientzerotensor", r"_lazy_clone", r"^aten\.lift",
          r"is_pinned", r"_pin_memory", r"is_same_size", r"_resize_output", r"^aten\.resize", r"equal\.default",
          r"_linalg_check_errors", r"_amp_update_scale", r"_reshape_alias"),
     "a testing, memory-management or eager-runtime op (no values of a model to compute, or kept out of "
     "functional graphs by AOT): not lowered"),
    (_has(r"linalg", r"cholesky", r"^aten\.lu_", r"_lu_", r"qr\.", r"svd", r"eig", r"triangular_solve",
          r"geqrf", r"ormqr", r"slogdet", r"_det\.", r"matrix_exp", r"pinv", r"householder", r"ldl_"),
     "a dense linear-algebra factorisation or solve: not lowered (no model the zoo covers factorises or "
     "inverts a matrix in its graph)"),
    (_has(r"fft", r"^aten\._conj", r"_neg_view", r"^aten\.complex", r"^aten\.polar", r"^aten\.angle"),
     "complex-valued (FFT, conjugate/negative views, complex construction): not lowered"),
    (_has(r"special_", r"gamma", r"digamma", r"zeta", r"bessel", r"^aten\.i0", r"erfcx", r"ndtri", r"sinc"),
     "a special function: not lowered (no model the zoo covers uses one)"),
    (_has(r"^aten\._foreach_"),
     "a foreach op with neither a CANN list op in TorchAir's op set nor a per-tensor lowering in op_plugin "
     "(op_plugin/_lowering/foreach_converters.py covers what optimizer steps use): not lowered yet"),
    (_has(r"backward"),
     "a gradient op: not lowered yet; a training graph reaching it fails to lower, naming it"),
]
_NOT_YET = ("not lowered yet: TorchAir and op_plugin have no converter; a graph reaching it fails to lower, "
            "naming it (none of the model code checked so far, the zoo and tests/test_usage_patterns*.py, reaches it)")


def reason(op: torch._ops.OpOverload) -> str:
    for test, why in _BY_OP:
        if test(op):
            return why
    name = str(op)
    for test, why in _BY_NAME:
        if test(name):
            return why
    return _NOT_YET


def _op_plugin_converters() -> dict:
    """aten op -> "module.function" of op_plugin's converter declared for it."""
    from .._lowering import registry

    return {target: f"{entry.fn.__module__.rsplit('.', 1)[-1]}.{entry.fn.__name__}"
            for entry in registry.entries() if entry.when != "library" for target in entry.targets}


def gaps() -> list[Gap]:
    """Every graph op TorchAir does not lower, with op_plugin's converter or the reason."""
    from .._lowering.torchair_api import TorchAirApi, is_not_implemented_stub

    ops = _in_torchairs_torch(graph_ops)
    ours = _op_plugin_converters()
    found = []
    for op in ops:
        torchairs = TorchAirApi.converter(op)  # TorchAir's own, past any op_plugin converter over it
        if torchairs is not None and not is_not_implemented_stub(torchairs):
            continue
        converter = ours.get(op)
        found.append(Gap(str(op), torch.Tag.core in op.tags, converter, None if converter else reason(op)))
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_page() -> str:
    rows = gaps()
    total = len(_in_torchairs_torch(graph_ops))
    lowered = [g for g in rows if g.converter]
    by_reason: dict[str, list[Gap]] = {}
    for gap in rows:
        if not gap.converter:
            by_reason.setdefault(gap.reason, []).append(gap)
    out = [
        "# aten ops TorchAir does not lower",
        "",
        f"<!-- Generated by `{REGENERATE}`.",
        "     Do not edit by hand: tests/test_docs_aten_gaps.py fails when this page and the code disagree. -->",
        "",
        "Which ops: every aten overload an npugraph graph can hold. TorchAir's backend traces with AOT autograd",
        "and applies none of torch's decomposition tables, so a graph is not limited to core ATen: it holds any",
        "overload tracing does not take apart: registered with the dispatcher, not CompositeImplicitAutograd",
        "(decomposed while tracing), functional (functionalization replaces mutable and out= overloads), with a",
        "CPU or CompositeExplicitAutograd kernel. Of those, the ones whose TorchAir converter is missing or only",
        "raises NotImplementedError are listed, with op_plugin's converter (op_plugin/_lowering/) or the reason",
        "they are not lowered. `core`: in core ATen (`torch.Tag.core`), what export and Inductor normalise to.",
        "",
        f"{total} aten overloads can appear in a graph; TorchAir lowers {total - len(rows)}; of the other "
        f"{len(rows)}, op_plugin lowers {len(lowered)} and {len(rows) - len(lowered)} are not lowered.",
        "",
        "## Lowered by op_plugin",
        "",
        "| aten op | core | op_plugin converter |",
        "|---|---|---|",
    ]
    out += [f"| `{g.op}` | {'yes' if g.core else ''} | `{g.converter}` |" for g in lowered]
    out += ["", "## Not lowered, by reason", ""]
    out += [f"- {len(gs)}: {_cell(why)}" for why, gs in by_reason.items()]
    for why, gs in by_reason.items():
        out += ["", f"### {_cell(why[0].upper() + why[1:].split(':')[0])}", "", _cell(why), "",
                "| aten op | core |", "|---|---|"]
        out += [f"| `{g.op}` | {'yes' if g.core else ''} |" for g in gs]
    return "\n".join(out) + "\n"


def main() -> int:
    sys.stdout.write(render_page())
    return 0


if __name__ == "__main__":
    sys.exit(main())
