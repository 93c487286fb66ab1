"""Shared fixtures for the simulator tests: TorchAir loaded once, the GE graph builder.

The single-node runner, the compiled-vs-eager check and the tolerance table are in
op_plugin._testing_harness (a test module never imports another module of tests/)."""

import pytest
import torch

from op_plugin._simulator import load_simulated_torchair
from op_plugin._testing_harness import GraphBuilder


@pytest.fixture(scope="session")
def torchair():
    return load_simulated_torchair()


@pytest.fixture(scope="session")
def ge_ir(torchair):
    from torchair._ge_concrete_graph import ge_ir_pb2

    return ge_ir_pb2


@pytest.fixture
def graph_builder(ge_ir):
    return lambda name="hand_built": GraphBuilder(ge_ir, name)


@pytest.fixture(scope="session")
def rotation():
    """rotation(d, mode) -> the matrix R with x @ R = x_new of torch_npu's rotary docs, built index by
    index (not by slicing x): mode "half" x_new = cat(-x2, x1); "interleave" x_new[2i] = -x[2i+1],
    x_new[2i+1] = x[2i]."""
    def rotation(d, mode):
        r = torch.zeros(d, d)
        for i in range(d // 2):
            if mode == "half":
                r[i + d // 2, i] = -1.0
                r[i, i + d // 2] = 1.0
            else:
                r[2 * i + 1, 2 * i] = -1.0
                r[2 * i, 2 * i + 1] = 1.0
        return r

    return rotation


@pytest.fixture
def recorded_plans(monkeypatch):
    """Every GraphPlan the executor builds during the test, in order (GraphPlan.__init__ wrapped)."""
    from op_plugin._simulator.interpreter.executor import plan as plan_module

    plans = []
    original = plan_module.GraphPlan.__init__

    def recording_init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        plans.append(self)

    monkeypatch.setattr(plan_module.GraphPlan, "__init__", recording_init)
    return plans
