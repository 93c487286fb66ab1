"""Eager NPU kernels through aclnn (`aclnn:` in the YAML), run against a stub of CANN's aclnn
runtime compiled here (tests/data/aclnn_stub/): the stub computes on host memory and logs every
call, so the binding's argument order, enums, strides, offsets, workspace, stream and handle
lifetimes are checked without an NPU. What only an Ascend host verifies: CANN's real libraries,
device memory, torch_npu's stream and the op's real kernel (docs/aclnn.md).
"""
import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import op_plugin
from op_plugin._registry import aclnn_kernel
from op_plugin._registry.aclnn_abi import ACL_DTYPES, ACL_FORMAT_ND, AclnnError
from op_plugin._registry.load import unload
from op_plugin._simulator.hosting.install import simulator_dir

ROOT = Path(__file__).resolve().parents[1]
STUB = ROOT / "tests" / "data" / "aclnn_stub" / "aclnn_stub.cpp"
INCLUDE = simulator_dir() / "torch_npu" / "include"
COMMON_BASE = INCLUDE / "third_party" / "op-plugin" / "op_plugin" / "utils" / "op_api_common_base.h"
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

YAML = """\
namespace: npu
ops:
  - func: npu_aclnn_vector_add(Tensor x1, Tensor x2) -> Tensor
    outputs: [{size: x1.shape, dtype: x1}]
    ge: {type: Add, outputs: [y]}
    aclnn: {function: aclnnStubVectorAdd, library: LIB}
  - func: npu_aclnn_linear(Tensor x, Tensor w, Tensor? bias=None) -> Tensor
    outputs: [{size: "[x.shape[0], w.shape[0]]", dtype: x}]
    aclnn: {function: aclnnStubLinear, library: LIB}
  - func: npu_aclnn_missing(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    aclnn: {function: aclnnNotThere, library: libop_plugin_no_such_library.so}
"""


@pytest.fixture(scope="module")
def stub_library(tmp_path_factory):
    out = tmp_path_factory.mktemp("aclnn_stub")
    library = out / "libaclnn_stub.so"
    done = subprocess.run(["g++", "-std=c++17", "-shared", "-fPIC", f"-I{INCLUDE}", str(STUB), "-o", str(library)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return library


class HostRuntime(aclnn_kernel.Runtime):
    """The binding's runtime pointed at the stub: CPU tensors stand for device tensors."""

    def __init__(self, library):
        super().__init__(api_libraries=(str(library),))
        self.workspaces = []

    def stream(self, device):
        return ctypes.c_void_p(0x5EA)

    def workspace(self, size, device):
        buffer = super().workspace(size, device)
        self.workspaces.append(size)
        return buffer


def _no_reference(*args, **kwargs):
    raise AssertionError("an aclnn kernel on an Ascend host never runs the reference kernel")


@pytest.fixture
def ops(stub_library, tmp_path, monkeypatch):
    log = tmp_path / "calls.log"
    monkeypatch.setenv("ACLNN_STUB_LOG", str(log))
    path = tmp_path / "aclnn_ops.yaml"
    path.write_text(YAML.replace("LIB", str(stub_library)))
    runtime = HostRuntime(stub_library)
    previous = aclnn_kernel.set_runtime(runtime)
    op_plugin.load_yaml(path)
    kernels = {name: aclnn_kernel.aclnn_kernel(op_plugin._registry.find(name).spec, _no_reference)
               for name in ("npu_aclnn_vector_add", "npu_aclnn_linear", "npu_aclnn_missing")}
    yield kernels, log, runtime
    unload("npu_aclnn_vector_add")
    aclnn_kernel.set_runtime(previous)


def _log(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _destroys_match_creates(lines):
    created = {m.group(1) for line in lines if (m := re.match(r"create \w+ (0x[0-9a-f]+)", line))}
    destroyed = [m.group(1) for line in lines if (m := re.match(r"destroy \w+ (0x[0-9a-f]+)", line))]
    assert created and sorted(created) == sorted(destroyed), lines


def test_stub_signatures_are_the_headers(tmp_path):
    """The stub's functions have exactly the types op_api_common_base.h declares for them."""
    text = COMMON_BASE.read_text()
    start = text.index("typedef struct aclOpExecutor aclOpExecutor;")
    block = text[start:text.index("typedef int (*_aclDestroyScalarList)")]
    names = re.findall(r"\(\*_(acl\w+)\)", block)
    assert {"aclCreateTensor", "aclCreateIntArray", "aclDestroyTensor"} <= set(names)
    checks = "\n".join(f'static_assert(std::is_same<decltype(&{n}), _{n}>::value, "{n}");' for n in names
                       if n not in ("aclCreateScalarList",))
    source = tmp_path / "signatures.cpp"
    source.write_text(f'#include <type_traits>\n#include "{STUB}"\n{block}\n{checks}\n'
                      "static_assert(ACL_FLOAT == 0 && ACL_FLOAT16 == 1 && ACL_INT64 == 9 && ACL_BF16 == 27, \"\");\n"
                      f"static_assert(ACL_FORMAT_ND == {ACL_FORMAT_ND}, \"\");\n"
                      + "".join(f"static_assert({v} == {v}, \"\");\n" for v in ACL_DTYPES.values()))
    done = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", f"-I{INCLUDE}", str(source)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def test_vector_add_runs_the_two_phase_api_and_destroys_every_handle(ops):
    kernels, log, runtime = ops
    x1, x2 = torch.randn(3, 4), torch.randn(3, 4)
    y = kernels["npu_aclnn_vector_add"](x1, x2)
    torch.testing.assert_close(y, x1 + x2)
    lines = _log(log)
    calls = [line.split()[1] for line in lines if line.startswith("call")]
    assert calls == ["aclnnStubVectorAddGetWorkspaceSize", "aclnnStubVectorAdd"]
    creates = [line for line in lines if line.startswith("create tensor")]
    assert len(creates) == 3 and all(f"dtype={ACL_DTYPES[torch.float32]} format={ACL_FORMAT_ND}" in c for c in creates)
    call = [i for i, line in enumerate(lines) if "call aclnnStubVectorAdd " in line][0]
    assert "workspace=set size=256 stream=0x5ea" in lines[call]
    assert runtime.workspaces == [256]
    _destroys_match_creates(lines)
    # handles are destroyed after the run, not before
    assert (max(i for i, line in enumerate(lines) if line.startswith("call"))
            < min(i for i, line in enumerate(lines) if line.startswith("destroy")))


def test_views_pass_strides_offset_and_the_storage(ops):
    kernels, log, _ = ops
    base = torch.randn(6, 8)
    x1 = base[1:4, ::2]          # offset 8, strides (8, 2)
    x2 = torch.randn(4, 3).t()   # strides (1, 3)
    y = kernels["npu_aclnn_vector_add"](x1, x2)
    torch.testing.assert_close(y, x1 + x2)
    creates = [line for line in _log(log) if line.startswith("create tensor")]
    assert "dims=3,4 strides=8,2 offset=8" in creates[0] and "storage=48" in creates[0]
    assert "dims=3,4 strides=1,3 offset=0" in creates[1] and "storage=12" in creates[1]


def test_linear_passes_inputs_then_output_and_null_for_a_missing_bias(ops):
    kernels, log, runtime = ops
    x, w, b = torch.randn(2, 5), torch.randn(3, 5), torch.randn(3)
    torch.testing.assert_close(kernels["npu_aclnn_linear"](x, w, b), x @ w.t() + b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kernels["npu_aclnn_linear"](x, w), x @ w.t(), rtol=1e-5, atol=1e-5)
    gets = [line for line in _log(log) if line.startswith("call aclnnStubLinearGetWorkspaceSize")]
    assert "bias=(nil)" in gets[1] and "bias=(nil)" not in gets[0]
    assert 0 in runtime.workspaces


def test_a_failing_status_raises_with_the_recent_error_and_still_destroys(ops, monkeypatch):
    kernels, log, _ = ops
    monkeypatch.setenv("ACLNN_STUB_FAIL", "1")
    with pytest.raises(AclnnError, match=r"npu_aclnn_vector_add .*aclnnStubVectorAddGetWorkspaceSize returned 161002: "
                                         r"EZ1001: x1 and x2 must have the same shape"):
        kernels["npu_aclnn_vector_add"](torch.ones(2), torch.ones(2))
    _destroys_match_creates(_log(log))


def test_a_missing_library_is_one_clear_error_never_the_reference(ops):
    kernels, _, _ = ops
    op_plugin.reference("npu_aclnn_missing")(lambda x: x)
    try:
        with pytest.raises(AclnnError, match=r"cannot load libop_plugin_no_such_library.so .*never falls back"):
            kernels["npu_aclnn_missing"](torch.ones(2))
    finally:
        op_plugin._registry.detach("npu_aclnn_missing", "reference")


def test_the_npu_key_gets_the_aclnn_kernel_and_cpu_keeps_the_reference(ops):
    for name in ("npu_aclnn_vector_add", "npu_aclnn_linear"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"npu::{name}", "PrivateUse1")
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("npu::npu_custom_rms_norm", "PrivateUse1")


def test_the_shipped_seeds_declare_their_aclnn_kernels():
    for name, function in (("npu_vector_add", "aclnnNpuVectorAdd"), ("npu_custom_linear", "aclnnNpuCustomLinear")):
        spec = op_plugin._registry.find(name).spec
        assert (spec.aclnn.function, spec.aclnn.library) == (function, "libcust_opapi.so")
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"npu::{name}", "PrivateUse1")
    x = torch.randn(3)
    torch.testing.assert_close(torch.ops.npu.npu_vector_add(x, x), x + x)  # CPU tensors: the reference
