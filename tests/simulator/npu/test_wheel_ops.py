"""Every operator of the wheel's schema list defined on a CPU host (op_plugin/_simulator/npu/ops.py), so that
every TorchAir npu converter module imports and every converter overload it declares registers (issue 23)."""
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from op_plugin._simulator.hosting.install import simulator_dir
from op_plugin._simulator.npu import ops as npu_ops
from op_plugin._simulator.npu import wheel_meta

pytestmark = pytest.mark.usefixtures("torchair")  # defines the ops first (loader.py), then imports TorchAir
WHEEL = simulator_dir() / "torch_npu"
DOC = Path(__file__).resolve().parents[3] / "docs" / "torch-npu-ops.md"


def test_every_op_of_the_schema_list_is_defined():
    entries = wheel_meta.all_schema_entries(WHEEL)
    assert len(entries) == 419
    undefined = npu_ops.undefined_ops()
    for name in entries:
        if name in undefined:
            continue
        base, _, overload = name.partition(".")
        schema = str(getattr(getattr(torch.ops.npu, base), overload or "default")._schema)
        assert schema.startswith(f"npu::{name}("), schema
    assert undefined == {}  # torch 2.13 takes every schema of torch-npu 2.13


def test_ops_with_a_wheel_meta_function_trace_on_fake_tensors():
    with torch._subclasses.FakeTensorMode():
        q = torch.empty(1, 1, 2, 16, dtype=torch.float16)
        cos = torch.empty(1, 1, 1, 16, dtype=torch.float16)
        q2, k2 = torch.ops.npu.npu_apply_rotary_pos_emb(q, q, cos, cos)
        assert q2.shape == q.shape and k2.shape == q.shape
        x = torch.empty(8, 64, dtype=torch.float16)
        y, scale = torch.ops.npu.npu_dynamic_quant(x)
        assert y.dtype == torch.int8 and scale.shape == (8,)
    meta = torch._C._dispatch_get_registrations_for_dispatch_key("Meta")
    assert "npu::npu_fused_infer_attention_score" in meta and "npu::npu_grouped_matmul.List" in meta


def test_schema_only_ops_fail_naming_the_op():
    assert "npu_sort_v2" in npu_ops.schema_only_ops()
    assert "npu_format_cast" not in npu_ops.schema_only_ops()  # op_plugin gives it a Meta (npu/dense.py META)
    with torch._subclasses.FakeTensorMode(), pytest.raises(Exception, match="npu_sort_v2"):
        torch.ops.npu.npu_sort_v2(torch.empty(2, 2))


def test_every_torchair_npu_converter_registers():
    code = textwrap.dedent("""
        import glob, os, re, warnings, torch
        from op_plugin._simulator.hosting.loader import load_torchair
        load_torchair()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from torchair._ge_concrete_graph.ge_converter import custom
            from torchair._ge_concrete_graph.fx2ge_converter import _get_converter
        failed = [str(w.message) for w in caught if "Failed to import" in str(w.message)]
        declared = set()
        for path in glob.glob(os.path.dirname(custom.__file__) + "/*.py"):
            declared.update(re.findall(r"register_fx_node_ge_converter\\(\\s*torch\\.ops\\.npu\\.(\\w+)\\.(\\w+)",
                                       open(path).read()))
        registered = [(op, ov) for op, ov in declared
                      if hasattr(torch.ops.npu, op) and _get_converter(getattr(getattr(torch.ops.npu, op), ov))]
        print(len(failed), len(custom.__all__), len(registered), len(declared))
        assert "torch_npu" not in __import__("sys").modules
    """)
    out = subprocess.run([sys.executable, "-c", code], check=True, timeout=300, capture_output=True, text=True)
    failed, modules, registered, declared = map(int, out.stdout.split()[-4:])
    assert (failed, declared) == (0, 142) and modules >= 123
    assert registered == 142


def test_docs_list_what_is_not_fully_defined():
    text = DOC.read_text()
    match = re.search(re.escape(npu_ops.DOC_BEGIN) + ".*?" + re.escape(npu_ops.DOC_END) + "\n", text, re.S)
    assert match, f"{DOC} has no generated section"
    assert match.group(0) == npu_ops.coverage_markdown(), (
        "docs/torch-npu-ops.md is stale: replace its generated section with "
        "op_plugin._simulator.npu.ops.coverage_markdown() (after define_npu_ops())")
