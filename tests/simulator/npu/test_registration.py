"""Registration of torch_npu's own operators on a CPU host (op_plugin/_simulator/npu/ops.py): schemas and Meta
functions from the wheel, kernels only for ops the wheel lists, TorchAir's converters registered for them, defined
and undone in a fresh process, nothing defined beside a real torch_npu. (The reference ops' tests that shared
tests/simulator/test_npu_ops.py are in tests/simulator/npu/test_reference.py.)"""
import subprocess
import sys
import textwrap

import pytest
import torch

from op_plugin._simulator.hosting.install import simulator_dir
from op_plugin._simulator.npu import ops as npu_ops
from op_plugin._simulator.npu.wheel_meta import META_MODULE

npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")  # defines the ops first (loader.py), then imports TorchAir


# ---- definitions: from the wheel, before TorchAir ----

def test_schemas_and_meta_functions_come_from_the_wheel():
    wheel = simulator_dir() / "torch_npu"
    codegen = (wheel / "csrc/aten/npu_native_functions_by_codegen.yaml").read_text()
    meta = torch._C._dispatch_get_registrations_for_dispatch_key("Meta")
    for name in npu_ops.COVERED:  # "op" (its default overload) or "op.overload"
        schema = str(npu_ops.overload_of(name)._schema)
        assert schema.startswith(f"npu::{name}("), schema
        assert f"func: {name}(" in codegen
        assert f"npu::{name}" in meta
    assert "npu_grouped_matmul.List" in npu_ops.COVERED  # an overload's kernel is registered like any other
    assert npu_ops.overload_of("npu_grouped_matmul.List") is npu.npu_grouped_matmul.List


def test_a_kernel_for_an_op_the_wheel_lacks_is_refused(monkeypatch):
    """A KERNELS key names an op of the wheel's list ("op" or "op.overload"); a misspelt one would never be
    registered, so defining the ops refuses it (before defining anything)."""
    monkeypatch.setitem(npu_ops.CPU_KERNELS, "npu_grouped_matmul.list", lambda *args: None)
    with pytest.raises(ValueError, match=r"npu_grouped_matmul\.list"):
        npu_ops._define(simulator_dir() / "torch_npu")


def test_meta_functions_are_the_wheels_code():
    from op_plugin._simulator.npu import wheel_meta as npu_ops_wheel
    wheel = simulator_dir() / "torch_npu"
    metas = npu_ops_wheel.meta_functions(wheel, [n for n in npu_ops.COVERED if n not in npu_ops.META_KERNELS])
    for fn in metas.values():
        assert fn.__code__.co_filename.endswith(META_MODULE)
    for name in npu_ops.META_KERNELS:  # op_plugin's Meta only where torch_npu writes its Meta in C++
        with pytest.raises(npu_ops_wheel.WheelOpUnavailable):
            npu_ops_wheel.meta_functions(wheel, [name])
    assert "torch_npu" not in sys.modules


# Covered ops TorchAir never sees or has no converter for, with the reason (ops op_plugin lowers itself
# because TorchAir has no converter are read from its registry: `_lowered_by_op_plugin`).
NOT_LOWERED = {
    "npu_scatter_pa_kv_cache": "functionalized to npu_scatter_pa_kv_cache_functional before TorchAir lowers",
    "npu_kv_rmsnorm_rope_cache_v2": "functionalized to npu_kv_rmsnorm_rope_cache_v2_functional",
    "attention_worker_scheduler_": "functionalized to attention_worker_scheduler (TorchAir has no in-place converter)",
    "ffn_worker_scheduler_": "functionalized to ffn_worker_scheduler (TorchAir has no in-place converter)",
}


def _lowered_by_op_plugin() -> set[str]:
    """The npu ops op_plugin's registry declares its own converter for because TorchAir has none: a
    library converter, or an aten converter `when="missing"` (installed at the first npugraph compile)."""
    from op_plugin._lowering.registry import entries

    def npu_name(target):
        if isinstance(target, str):
            namespace, _, name = target.partition("::")
        elif isinstance(target, torch._ops.OpOverload):
            namespace, name, overload = str(target).split(".")
            name = name if overload == "default" else f"{name}.{overload}"
        else:  # a Python callable (size arithmetic)
            return None
        return name if namespace == npu_ops.NAMESPACE else None

    names = {npu_name(t) for entry in entries() if entry.when in ("library", "missing") for t in entry.declared}
    return names - {None}


def test_torchair_registered_its_converters_for_them():
    from torchair._ge_concrete_graph.fx2ge_converter import _get_converter
    own = _lowered_by_op_plugin()
    assert {"npu_moe_token_permute", "npu_moe_token_unpermute"} <= own
    assert not own & set(NOT_LOWERED)
    for name in npu_ops.COVERED:
        converter = _get_converter(npu_ops.overload_of(name))
        if name in own:  # op_plugin's, once installed; never TorchAir's (then op_plugin's would not be needed)
            assert converter is None or not converter.__module__.startswith("torchair."), name
        elif name not in NOT_LOWERED:
            assert converter is not None, name
    for name in NOT_LOWERED:
        assert name in npu_ops.COVERED and _get_converter(npu_ops.overload_of(name)) is None, name


def test_handle_undoes_and_redefines_in_a_fresh_process():
    code = textwrap.dedent("""
        import sys, torch
        from op_plugin._simulator.npu import ops as npu_ops
        handle = npu_ops.define_npu_ops()
        assert npu_ops.define_npu_ops() is handle          # idempotent
        assert torch.ops.npu.npu_rms_norm(torch.ones(2, 4), torch.ones(4))[0].shape == (2, 4)
        handle.destroy(); handle.destroy()
        assert not hasattr(torch.ops.npu, "npu_swiglu")
        again = npu_ops.define_npu_ops()
        assert again is not handle and hasattr(torch.ops.npu, "npu_swiglu")
        assert "torch_npu" not in sys.modules
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_nothing_is_defined_beside_a_torch_npu(tmp_path):
    """An Ascend host's torch_npu (an installed torch-npu distribution: op_plugin takes no other torch_npu for
    real, `_base.installed`) defines these ops itself."""
    site = tmp_path / "site"
    (site / "torch_npu").mkdir(parents=True)
    (site / "torch_npu" / "__init__.py").write_text("")
    (site / "torch_npu-2.13.0.dist-info").mkdir()
    (site / "torch_npu-2.13.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-npu\n"
                                                                  "Version: 2.13.0\n")
    code = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(site)!r})
        from op_plugin._simulator.npu import ops as npu_ops
        assert npu_ops.define_npu_ops() is None
        assert not hasattr(torch.ops.npu, "npu_rms_norm")
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ---- eager CPU kernels against torch formulas ----
