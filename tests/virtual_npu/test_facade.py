"""`import torch_npu` on the virtual NPU (the façade, op_plugin/_simulator/device/torch_npu_facade.py): each
check in a child process, as in test_device.py."""
from __future__ import annotations

from .test_device import _ok, _python, built_extension  # noqa: F401  (the module fixture builds the C++ part)


def test_import_torch_npu_gives_the_facade_only_while_active(tmp_path):
    out = _ok("""
        import importlib.util, torch, torch_npu
        assert torch_npu.npu is torch.npu and torch_npu.__version__ == "2.13.0"
        import op_plugin._backend as backend
        assert not backend.on_ascend_host()           # op_plugin still sees a CPU host
        from torch_npu.npu.utils import get_soc_version
        print(get_soc_version(), torch_npu.npu._backends.get_soc_version(), torch.npu.is_bf16_supported())
        props = torch.npu.get_device_properties(0)
        print(props.name, props.total_memory, props.multi_processor_count, torch.npu.get_device_name())
    """, tmp_path)
    assert out.split() == ["223", "223", "True", "Ascend910B3", str(64 << 30), "40", "Ascend910B3", "(op_plugin",
                           "virtual", "NPU)"]
    result = _python("import torch, importlib.util; assert importlib.util.find_spec('torch_npu') is None; "
                     "import torch_npu", tmp_path, active=False)
    assert result.returncode != 0 and "No module named 'torch_npu'" in result.stderr, result.stderr[-2000:]


def test_the_soc_is_settable(tmp_path):
    out = _ok("import torch, torch_npu; print(torch_npu.npu.utils.get_soc_version(), torch_npu.npu.get_device_name())",
              tmp_path, OP_PLUGIN_VIRTUAL_NPU_SOC="Ascend910B1")
    assert out.split()[:2] == ["220", "Ascend910B1"]


def test_npu_ops_on_npu_tensors_equal_the_cpu_call_bit_for_bit(tmp_path):
    _ok("""
        import torch, torch_npu
        torch.manual_seed(0)
        assert torch._C._dispatch_has_kernel_for_dispatch_key("npu::npu_rms_norm", "PrivateUse1")
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            x, gamma = torch.randn(4, 64).to(dtype), torch.randn(64).to(dtype)
            on_npu = torch_npu.npu_rms_norm(x.npu(), gamma.npu())
            on_cpu = torch.ops.npu.npu_rms_norm(x, gamma)
            for a, b in zip(on_npu, on_cpu):
                assert a.device.type == "npu" and torch.equal(a.cpu(), b), dtype
    """, tmp_path)


def test_what_is_not_emulated_is_refused_by_name(tmp_path):
    out = _ok("""
        import torch, torch_npu  # torch first: the virtual NPU comes up inside `import torch`
        for name, call in (("foo", lambda: torch_npu.npu.foo), ("npu_no_such_op", lambda: torch_npu.npu_no_such_op),
                           ("bar", lambda: torch_npu.npu.utils.bar)):
            try:
                call()
            except AttributeError as error:
                assert name in str(error) and "the virtual NPU does not provide" in str(error), error
                print(type(error).__name__)
            else:
                raise AssertionError(name)
        assert hasattr(torch_npu.npu, "NPUGraph") and not hasattr(torch_npu.npu, "ExternalStream")
    """, tmp_path)
    assert out.split() == ["VirtualNpuMissing"] * 3


def test_an_npu_op_without_the_unpacked_wheel_names_the_folder_and_the_fix(tmp_path):
    """Issue 35: with no unpacked wheel torch_npu's ops are not defined; torch_npu.npu_rms_norm says why and what
    to do, not only that the virtual NPU lacks it."""
    empty = tmp_path / "empty-simulator"
    empty.mkdir()
    out = _ok("""
        import warnings
        warnings.simplefilter("ignore")
        import torch, torch_npu
        try:
            torch_npu.npu_rms_norm
        except AttributeError as error:
            print(type(error).__name__, "|", error)
    """, tmp_path, OP_PLUGIN_SIMULATOR_DIR=str(empty))
    kind, message = out.strip().splitlines()[-1].split(" | ", 1)
    assert kind == "VirtualNpuMissing" and message.startswith("torch_npu.npu_rms_norm: torch_npu's operators")
    assert str(empty) in message and "op-plugin setup-simulator" in message


def test_an_npu_op_without_an_eager_kernel_is_refused_by_name_on_npu_tensors(tmp_path):
    """Issue 37: the boxed fallback runs the op's refusing CPU kernel, not torch's bare "Could not run"."""
    out = _ok("""
        import torch, torch_npu
        try:
            torch_npu.npu_fast_gelu(torch.randn(3, 4).npu())
        except NotImplementedError as error:
            print(error)
    """, tmp_path)
    assert out.startswith("npu::npu_fast_gelu: the CPU simulator has no eager kernel") and "npugraph" in out
