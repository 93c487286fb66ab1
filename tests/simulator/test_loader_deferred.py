"""What TorchAir's load defers to first use (op_plugin/_simulator/hosting/loader_deferred.py): torch._inductor's
pattern matcher and TorchAir's converter modules (imported by a compile-cache miss, never by a hit; the converter
modules' own tests are in test_converter_loading.py) and the converter registry's signatures.

The oracle for a warm-cache process that never imported the pattern matcher is the process that lowered the
graph (a miss, with the passes run): the same bits. For the signatures, inspect.signature itself.
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

from op_plugin._simulator.hosting import compile_cache, loader_deferred

_CHILD = textwrap.dedent("""
    import json, sys, torch, op_plugin
    from op_plugin._simulator.hosting import compile_cache, loader_deferred
    from op_plugin._tools.demo.model import DemoBlock, example_inputs
    torch.manual_seed(0)
    model = torch.nn.Sequential(DemoBlock(), DemoBlock()).eval()
    class Stack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = model
        def forward(self, x, cos, sin):
            for block in self.blocks:
                x = block(x, cos, sin)
            return x
    stack = Stack().eval()
    inputs = example_inputs()
    with torch.no_grad():
        out = torch.compile(stack, backend="npugraph")(*inputs)
        error = (out - stack(*inputs)).abs().max().item()
    from torchair import npu_fx_compiler
    s = compile_cache.stats()
    print(json.dumps({
        "hits": s.hits, "misses": s.misses, "out": out.flatten().tolist(), "error": error,
        "pattern_matcher": "torch._inductor.pattern_matcher" in sys.modules,
        "pattern_passes_deferred": loader_deferred.is_deferred(npu_fx_compiler._apply_pattern_passes),
        "converter_modules": sum(".ge_converter.aten." in m or ".ge_converter.custom." in m for m in sys.modules),
    }))
""")


def _child(cache_root) -> dict:
    env = {**os.environ, "OP_PLUGIN_CACHE_DIR": str(cache_root)}
    env.pop("OP_PLUGIN_COMPILE_CACHE", None)
    done = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    reply = json.loads(done.stdout.strip().splitlines()[-1])
    reply["stderr"] = done.stderr
    return reply


def test_a_warm_cache_process_never_imports_the_pattern_matcher_and_computes_the_misss_bits(tmp_path):
    cold = _child(tmp_path)
    warm = _child(tmp_path)
    assert (cold["misses"], cold["hits"]) == (1, 0) and cold["pattern_matcher"]
    assert not cold["pattern_passes_deferred"]  # the miss ran TorchAir's own pattern passes
    assert (warm["hits"], warm["misses"]) == (1, 0)
    assert not warm["pattern_matcher"] and warm["pattern_passes_deferred"]
    assert cold["converter_modules"] > 700 and warm["converter_modules"] == 0  # the hit looked up no converter
    assert warm["out"] == cold["out"] and cold["error"] < 1e-4

    # A tampered entry in that process is refused with a warning, never run: the graph is lowered again
    # (the pattern matcher imported for it), with the same bits.
    (entry,) = (tmp_path / f"compile-v{compile_cache.FORMAT}").glob("*.json")
    text = json.loads(entry.read_text())
    text["payload"] = text["payload"].replace("kernel", "kernel ", 1)
    entry.write_text(json.dumps(text))
    refused = _child(tmp_path)
    assert "ignored and removed the entry" in refused["stderr"]
    assert (refused["hits"], refused["misses"]) == (0, 1) and refused["pattern_matcher"]
    assert refused["out"] == cold["out"]


def test_the_deferral_answers_only_the_listed_importer_and_names():
    importer = {"__name__": "torchair.npu_fx_compiler"}
    post_grad = "torch._inductor.fx_passes.post_grad"
    assert loader_deferred._deferrable(importer, post_grad, ("remove_noop_ops",), 0)
    assert loader_deferred._deferrable({"__name__": "torchair.other"}, post_grad, ("remove_noop_ops",), 0) is None
    assert loader_deferred._deferrable(importer, post_grad, ("remove_noop_ops", "same_meta"), 0) is None
    assert loader_deferred._deferrable(importer, post_grad, None, 0) is None  # `import x`: Python's own
    assert loader_deferred._deferrable(importer, "pattern_util", ("_apply_pattern_passes",), 1) is None


def test_a_forwarder_calls_the_real_function_and_its_importer_then_holds_it(monkeypatch):
    import types

    importer = types.ModuleType("p2_importer_for_test")
    monkeypatch.setitem(sys.modules, importer.__name__, importer)
    bound = loader_deferred._Bound(importer.__name__, "textwrap", ("dedent",))
    importer.dedent = bound.dedent
    assert loader_deferred.is_deferred(importer.dedent)
    assert bound.dedent("  a\n  b") == "a\nb"
    import textwrap as real

    assert importer.dedent is real.dedent


def _plain(a, b=1, /, c=2, *rest, meta_outputs=None, **options):
    return a


@pytest.mark.parametrize("fn", [_plain, lambda meta_outputs: 0, lambda x, *, y: 0, lambda *a, **k: 0])
def test_parameter_names_from_code_are_inspects(fn):
    assert tuple(loader_deferred._ParameterNames(fn.__code__).parameters) == tuple(inspect.signature(fn).parameters)


def test_every_registered_converter_requires_meta_outputs_as_inspect_says():
    from op_plugin import _simulator

    _simulator.load_simulated_torchair()
    from torchair._ge_concrete_graph import fx2ge_converter

    assert fx2ge_converter.inspect is inspect  # only TorchAir's own registrations, during its load, used the shim
    checked = 0
    for namespace in ("aten", "prims", "npu", "npu_define", "air"):
        for packet_name in dir(getattr(torch.ops, namespace)):
            packet = getattr(getattr(torch.ops, namespace), packet_name, None)
            if not isinstance(packet, torch._ops.OpOverloadPacket):
                continue
            for overload in packet.overloads():
                converter = getattr(getattr(packet, overload), "_ge_converter", None)
                if converter is None or not hasattr(converter, "require_meta"):
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    expected = "meta_outputs" in inspect.signature(converter).parameters
                assert converter.require_meta == expected, (packet_name, overload)
                checked += 1
    assert checked > 1500


def test_a_signature_read_later_is_inspects():
    op = torch.ops.aten.add.Tensor
    lazy = loader_deferred._SignatureOnDemand(op)
    assert lazy.parameters == inspect.signature(op).parameters and str(lazy) == str(inspect.signature(op))
