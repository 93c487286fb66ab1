"""A YAML sample too large to build is a located error before anything is allocated; npugraph answers meta
inputs as eager does (meta results, nothing simulated); $OP_PLUGIN_SIMULATOR_DIR naming no folder is said,
not silent."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import op_plugin
from op_plugin._registry import detach
from op_plugin._registry.load import unload
from op_plugin._spec.parse_samples import MAX_SAMPLE_BYTES, MAX_SAMPLE_ELEMENTS
from op_plugin.testing import sample_cases


def test_a_huge_sample_is_refused_when_the_file_is_read(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text(textwrap.dedent("""
        ops:
          - func: npu_probe_huge(Tensor x, Tensor y) -> Tensor
            outputs: [{size: x.shape, dtype: x}]
            samples:
              - {x: [float32, [2, 3]], y: [float32, [100000, 100000, 100000]]}
    """))
    with pytest.raises(op_plugin.YamlSpecError) as info:
        op_plugin.load_yaml(path)
    text = str(info.value)
    assert text.startswith(f"{path}:6: op 'npu_probe_huge': field 'samples[0].y': float32 [100000, 100000, 100000]")
    assert f"at most {MAX_SAMPLE_ELEMENTS} elements and {MAX_SAMPLE_BYTES} bytes" in text
    assert not hasattr(torch.ops.npu, "npu_probe_huge")


def test_sizes_given_at_the_call_are_checked_before_allocation(tmp_path):
    path = tmp_path / "dims.yaml"
    path.write_text(textwrap.dedent("""
        ops:
          - func: npu_probe_dims(Tensor x) -> Tensor
            outputs: [{size: x.shape, dtype: x}]
            dims: {B: 4, S: 8}
            samples:
              - {x: [float32, [B, S, S]]}
    """))
    names = op_plugin.load_yaml(path)
    try:
        (case,) = sample_cases("npu_probe_dims")
        (x,), _ = case.inputs()
        assert x.shape == (4, 8, 8)
        with pytest.raises(op_plugin.OpPluginError) as info:
            case.inputs({"B": 60000, "S": 60000})  # 2e14 elements: refused, not handed to the allocator
        assert str(info.value).startswith(f"{path}:7: op 'npu_probe_dims': field 'samples[0].x': float32 "
                                          "[60000, 60000, 60000]")
    finally:
        unload(names[0])
        detach("npu_probe_dims", "reference")


def _rms_norm_twice(x, gamma):
    y, _ = torch.ops.npu.npu_custom_rms_norm(x, gamma, 1e-6)
    return y * 2


def test_meta_inputs_give_meta_results_as_eager_does():
    x, gamma = torch.empty(2, 8, device="meta"), torch.empty(8, device="meta")
    eager = _rms_norm_twice(x, gamma)
    compiled = torch.compile(_rms_norm_twice, backend="npugraph")
    result = compiled(x, gamma)
    assert result.device.type == "meta" and result.shape == eager.shape and result.dtype == eager.dtype
    # after a compile for CPU tensors too, and with a backward through the meta graph
    cpu = compiled(torch.randn(2, 8), torch.ones(8))
    assert cpu.device.type == "cpu"
    leaf = torch.empty(3, 8, device="meta", requires_grad=True)
    out = compiled(leaf, gamma)
    assert out.device.type == "meta" and out.shape == (3, 8)


def test_a_simulator_dir_that_is_no_folder_is_said(tmp_path):
    missing = tmp_path / "no-such-folder"
    env = {**os.environ, "OP_PLUGIN_SIMULATOR_DIR": str(missing)}
    code = "import op_plugin, torch; print(hasattr(torch.ops.npu, 'npu_rms_norm'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
    warning = [line for line in done.stderr.splitlines() if "SimulatorDirWarning" in line]
    assert len(warning) == 1, done.stderr[-2000:]
    assert f"$OP_PLUGIN_SIMULATOR_DIR is '{missing}', which is not a folder" in warning[0]
    assert "torch.ops.npu" in warning[0] and "op-plugin setup-simulator" in warning[0]
