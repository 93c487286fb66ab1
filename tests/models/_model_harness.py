"""Helpers for tests/models: compile an example model with npugraph and compare with eager.

Not a conftest: imported by name from this folder only (pytest puts tests/models on sys.path).
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

import op_plugin  # noqa: F401  (registers the shipped ops)
from op_plugin._ge.graph import op_types as ge_op_types
from op_plugin._simulator import capture_graphs

# examples/ lives at the repository root, which .venv/bin/pytest does not put on sys.path.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

DTYPE_IDS = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


from op_plugin.testing import CountingNpugraph, tolerances  # noqa: F401  (CountingNpugraph: re-exported)


def compile_model(model, dynamic: bool):
    backend = CountingNpugraph()
    return torch.compile(model, backend=backend, fullgraph=True, dynamic=dynamic), backend


def clone_inputs(inputs):
    return tuple(t.detach().clone() for t in inputs)


def run_and_capture(compiled, inputs):
    """Run the compiled model under no_grad; returns (outputs, GE op types of each new GE graph)."""
    with capture_graphs() as graphs, torch.no_grad():
        out = compiled(*inputs)
    return out, [ge_op_types(g) for g in graphs], list(graphs)


def dynamic_data_dims(graph) -> list:
    """Shapes of the graph's Data nodes (-1 marks a symbolic dim)."""
    return [list(op.output_desc[0].shape.dim) for op in graph.op if op.type == "Data"]


def assert_close(got, want, tolerance: dict, what: str = "output"):
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape, want.shape)
    torch.testing.assert_close(got, want, **tolerance, msg=lambda m: f"{what}: {m}")


def check_against_eager(compiled, model, inputs, dtype):
    """Run `compiled` on copies of `inputs` and the eager model on the originals; compare."""
    got, op_types, graphs = run_and_capture(compiled, clone_inputs(inputs))
    with torch.no_grad():
        want = model(*inputs)
    assert_close(got, want, tolerances(dtype))
    return op_types, graphs


def check_dynamic_sizes(model, inputs_per_size, dtype, check=check_against_eager):
    """Compile with dynamic=True once; every size must match eager through one GE graph whose
    Data nodes have a symbolic (-1) dim."""
    compiled, backend = compile_model(model, dynamic=True)
    graph_count = 0
    for index, inputs in enumerate(inputs_per_size):
        _, graphs = check(compiled, model, inputs, dtype)
        graph_count += len(graphs)
        if index == 0:
            assert any(-1 in dims for dims in dynamic_data_dims(graphs[0]))
    assert backend.compiles == 1 and graph_count == 1
