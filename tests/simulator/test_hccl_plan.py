"""The executor's side of the Hcom kernels (kernels/hccl.py), in one process: a collective is never
folded, even over a Const; and a graph that cannot reach its process group fails naming the node,
before any collective runs. The kernels themselves run on gloo ranks in tests/distributed."""
import pytest
import torch

from op_plugin._simulator.interpreter.errors import GeExecutionError
from op_plugin._simulator.interpreter.executor import compile_graph


def _all_reduce_of_const(graph_builder, group: str):
    builder = graph_builder("all_reduce_of_const")
    const = builder.const("c", torch.ones(2, 3))
    (y,) = builder.node("all_reduce", "HcomAllReduce", [const], [(torch.float32, [2, 3])])
    builder.graph.op[-1].attr["reduction"].s = b"sum"  # string attrs, which the builder does not take
    builder.graph.op[-1].attr["group"].s = group.encode()
    (z,) = builder.node("cast", "Cast", [const], [(torch.float16, [2, 3])], dst_type=1)
    return builder.output([y, z], [(torch.float32, [2, 3]), (torch.float16, [2, 3])])


def test_a_collective_is_never_folded(graph_builder):
    plan = compile_graph(_all_reduce_of_const(graph_builder, "tag=ptd:0;rank_list=0,1"))
    steps = {step.op.name: step for step in plan.steps}
    assert steps["cast"].folded  # a Const's cast is computed once per signature
    assert not steps["all_reduce"].folded and steps["all_reduce"].collective


@pytest.mark.skipif(torch.distributed.is_available() and torch.distributed.is_initialized(),
                    reason="this process has a process group")
@pytest.mark.parametrize("group, message", [
    ("tag=ptd:0;rank_list=0,1", "call torch.distributed.init_process_group"),
    ("hccl_world_group", "the graph was built for HCCL"),
])
def test_an_unreachable_group_fails_naming_the_node(graph_builder, group, message):
    plan = compile_graph(_all_reduce_of_const(graph_builder, group))
    with pytest.raises(GeExecutionError, match="HcomAllReduce \\(node 'all_reduce'\\)") as error:
        plan.run([])
    assert message in str(error.value)
