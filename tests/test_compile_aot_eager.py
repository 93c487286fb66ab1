"""Every shipped op under torch.compile(backend="aot_eager"): whole in the graph, no recompiles
over three sizes with dynamic=True, and the same numbers as eager."""
import pytest
import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

from op_plugin.testing import assert_results_close, clone_tree


class GraphRecorder:
    """An aot_eager backend that counts finished compiles and keeps their dynamo and AOT graphs.

    Only compiles that finish count: dynamo may abandon a first attempt and restart the same
    frame (e.g. to specialise a float argument), which is not a recompile.
    """

    def __init__(self):
        self.dynamo_graphs, self.aot_graphs = [], []
        self._aot = aot_autograd(fw_compiler=self._keep_forward)

    @property
    def compiles(self) -> int:
        return len(self.dynamo_graphs)

    def _keep_forward(self, gm, example_inputs):
        self._pending_aot = gm
        return make_boxed_func(gm.forward)

    def __call__(self, gm, example_inputs):
        compiled = self._aot(gm, example_inputs)
        self.dynamo_graphs.append(gm)
        self.aot_graphs.append(self._pending_aot)
        return compiled


def _targets(gm):
    """Call targets in a graph, looking inside auto_functionalized wrappers of in-place ops."""
    found = []
    for node in gm.graph.nodes:
        if node.op == "call_function":
            found.append(node.target)
            found.extend(a for a in node.args if isinstance(a, torch._ops.OpOverload))
    return found


@pytest.mark.parametrize("dynamic", [True], ids=["dynamic"])
def test_compiled_matches_eager_without_recompiles(case, dynamic):
    recorder = GraphRecorder()
    op = case.op

    def fn(*args, **kwargs):
        return op(*args, **kwargs)

    compiled = torch.compile(fn, backend=recorder, dynamic=dynamic, fullgraph=True)
    variants = case.variants(3)
    assert len({tuple(v.values()) for v in variants}) == 3 or not case.used_dims()
    for dims in variants:
        args, kwargs = case.inputs(dims, seed=7)
        eager_args, eager_kwargs = clone_tree((args, kwargs))
        with torch.no_grad():
            got = compiled(*args, **kwargs)
            want = op(*eager_args, **eager_kwargs)
        assert_results_close(got, want)
        # in-place ops must have mutated the caller's tensors the same way
        assert_results_close((args, kwargs), (eager_args, eager_kwargs))
    assert recorder.compiles == 1, f"recompiled: {recorder.compiles} compiles"
    # whole in the graph: the op itself is called, not a decomposition into aten ops
    assert op in _targets(recorder.dynamo_graphs[0])
    assert op in _targets(recorder.aot_graphs[0])
