"""The GE executor: runs hand-built and captured graphs, and refuses results that contradict the graph."""

import pytest
import torch

from op_plugin._simulator import (
    GeExecutionError, capture_graphs, execute_graph, register_ge_kernel, supported_op_types,
)
from op_plugin._ge.values import GE_TO_TORCH, PROTO_TO_TORCH

F32, F16, I64 = torch.float32, torch.float16, torch.int64


def _relu_graph(graph_builder, out_shape=(2, 3), out_dtype=F32):
    g = graph_builder()
    x = g.data("x", F32, [-1, 3])
    (y,) = g.node("relu", "Relu", [x], [(out_dtype, None)])
    return g.output([y], [(out_dtype, list(out_shape))], ge_dtypes=[0])


def test_runs_a_hand_built_graph_with_const_control_edges_and_unfed_optionals(graph_builder):
    g = graph_builder()
    x = g.data("x", F32, [-1, 4])
    w = g.const("w", torch.arange(12, dtype=F32).reshape(3, 4))
    perm = g.const("perm", torch.tensor([1, 0], dtype=I64))
    (wt,) = g.node("t", "Transpose", [w, perm], [(F32, None)])
    (mm,) = g.node("mm", "MatMulV2", [x, wt, "", ""], [(F32, [-1, 3])], transpose_x1=False, transpose_x2=False)
    (r,) = g.node("relu", "Relu", [mm, "t:-1"], [(F32, [-1, 3])])  # "t:-1" is a control edge
    graph = g.output([r, mm], [(F32, [-1, 3]), (F32, [-1, 3])], ge_dtypes=[0, 0])
    inp = torch.randn(5, 4)
    got_relu, got_mm = execute_graph(graph, [inp])
    expected = inp @ torch.arange(12, dtype=F32).reshape(3, 4).T
    torch.testing.assert_close(got_mm, expected)
    torch.testing.assert_close(got_relu, torch.relu(expected))


def test_nodes_run_in_topological_order_not_list_order(graph_builder):
    g = graph_builder()
    x = g.data("x", F32, [2])
    g.node("second", "Neg", ["first:0"], [(F32, [2])])
    g.node("first", "Exp", [x], [(F32, [2])])
    graph = g.output(["second:0"], [(F32, [2])])
    inp = torch.tensor([0.0, 1.0])
    torch.testing.assert_close(execute_graph(graph, [inp])[0], -torch.exp(inp))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool,
                                   torch.int8, torch.uint8])
def test_const_values_decode_with_the_protobuf_dtype_numbering(graph_builder, dtype):
    value = (torch.arange(6) % 3).to(dtype).reshape(2, 3)
    g = graph_builder()
    c = g.const("c", value)
    graph = g.output([c], [(dtype, [2, 3])])
    (got,) = execute_graph(graph, [])
    assert got.dtype == dtype and torch.equal(got, value)


def test_dtype_tables_agree_with_torchair(torchair):
    from torchair.ge._ge_graph import DataType, _ge_dtype_to_ge_proto_dtype, torch_type_to_ge_type

    for number, dtype in GE_TO_TORCH.items():
        if dtype is torch.complex32 or dtype in (torch.uint16, torch.uint32, torch.uint64):
            continue  # torch_type_to_ge_type has no entry for these
        if dtype is torch.int4:   # the simulator's carrier of DT_INT4 (one value per byte); TorchAir types it quint4x2
            assert torch_type_to_ge_type(torch.quint4x2) == number
            continue
        assert torch_type_to_ge_type(dtype) == number, dtype
        assert PROTO_TO_TORCH[_ge_dtype_to_ge_proto_dtype(number)] == dtype
    assert DataType.DT_FLOAT == 0 and DataType.DT_BF16 == 27


def test_wrong_output_shape_is_refused_naming_node_and_shapes(graph_builder):
    graph = _relu_graph(graph_builder, out_shape=(2, 3))
    with pytest.raises(GeExecutionError) as info:
        execute_graph(graph, [torch.randn(4, 3)])
    message = str(info.value)
    assert "output 0" in message and "relu:0" in message and "[2, 3]" in message and "[4, 3]" in message


def test_a_kernel_returning_the_wrong_shape_is_caught_at_its_node(graph_builder):
    g = graph_builder()
    x = g.data("x", F32, [2, 3])
    (y,) = g.node("act", "Relu", [x], [(F32, [2, 3])])
    (z,) = g.node("neg", "Neg", [y], [(F32, [2, 3])])
    graph = g.output([z], [(F32, [2, 3])])
    handle = register_ge_kernel("Relu", lambda x: x[:1], replace=True)
    try:
        with pytest.raises(GeExecutionError) as info:
            execute_graph(graph, [torch.randn(2, 3)])
    finally:
        handle.destroy()
    message = str(info.value)
    assert "'act'" in message and "(Relu)" in message and "output 0" in message
    assert "expected [2, 3], got [1, 3]" in message
    execute_graph(graph, [torch.randn(2, 3)])  # the built-in kernel is back


def test_a_kernel_returning_the_wrong_dtype_is_caught(graph_builder):
    graph = _relu_graph(graph_builder)
    handle = register_ge_kernel("Relu", lambda x: torch.relu(x).double(), replace=True)
    try:
        message = r"'relu' \(Relu\) output 0: dtype mismatch, expected torch.float32, got torch.float64"
        with pytest.raises(GeExecutionError, match=message):
            execute_graph(graph, [torch.randn(2, 3)])
    finally:
        handle.destroy()


def test_graph_output_dtype_is_checked_against_output_dtypes_attr(graph_builder):
    g = graph_builder()
    x = g.data("x", F32, [2])
    (y,) = g.node("cast", "Cast", [x], [(F16, None)], dst_type=1)  # GE enum: 1 = float16
    graph = g.output([y], [(F16, [2])], ge_dtypes=[0])  # ...but the graph promises float32
    with pytest.raises(GeExecutionError, match="_output_dtypes expects torch.float32, got torch.float16"):
        execute_graph(graph, [torch.ones(2)])


def test_unknown_op_type_names_type_node_and_how_to_add_it(graph_builder):
    g = graph_builder()
    x = g.data("x", F32, [2])
    (y,) = g.node("mystery_node", "NoSuchGeOp", [x], [(F32, [2])])
    graph = g.output([y], [(F32, [2])])
    with pytest.raises(GeExecutionError) as info:
        execute_graph(graph, [torch.ones(2)])
    message = str(info.value)
    assert "'NoSuchGeOp'" in message and "'mystery_node'" in message and "register_ge_kernel" in message


def test_wrong_graph_input_is_refused(graph_builder):
    graph = _relu_graph(graph_builder)
    with pytest.raises(GeExecutionError, match=r"graph input 0 .*shape mismatch, expected \[-1, 3\], got \[2, 4\]"):
        execute_graph(graph, [torch.randn(2, 4)])
    with pytest.raises(GeExecutionError, match="dtype mismatch, expected torch.float32, got torch.int64"):
        execute_graph(graph, [torch.ones(2, 3, dtype=I64)])


def test_custom_kernels_register_and_unregister(graph_builder):
    g = graph_builder()
    x = g.data("x", F32, [3])
    (y,) = g.node("scale", "MyScaleForTest", [x], [(F32, [3])], factor=3)
    graph = g.output([y], [(F32, [3])])
    handle = register_ge_kernel("MyScaleForTest", lambda x, *, factor: x * factor)
    try:
        assert "MyScaleForTest" in supported_op_types()
        with pytest.raises(ValueError, match="already has a kernel"):
            register_ge_kernel("MyScaleForTest", lambda x: x)
        torch.testing.assert_close(execute_graph(graph, [torch.ones(3)])[0], torch.full((3,), 3.0))
    finally:
        handle.destroy()
    assert "MyScaleForTest" not in supported_op_types()
    with pytest.raises(ValueError, match="built-in kernel"):
        register_ge_kernel("Relu", lambda x: x)


def test_tampered_captured_graph_is_refused(torchair):
    from torchair.configs.compiler_config import CompilerConfig

    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    compiled = torch.compile(model, backend=torchair.get_npu_backend(compiler_config=CompilerConfig()))
    x = torch.randn(2, 4)
    with torch.no_grad(), capture_graphs() as graphs:
        compiled(x)
    graph = type(graphs[0])()
    graph.CopyFrom(graphs[0])
    by_shape = {(2, 4): x, (4, 4): model[0].weight, (4,): model[0].bias}  # the three Data nodes differ in shape
    inputs = [None] * sum(op.type == "Data" for op in graph.op)
    for op in graph.op:
        if op.type == "Data":
            inputs[op.attr["index"].i] = by_shape[tuple(op.output_desc[0].shape.dim)]
    torch.testing.assert_close(execute_graph(graph, inputs)[0], model(x), atol=1e-5, rtol=1.3e-6)
    net_output = [op for op in graph.op if op.type == "NetOutput"][0]
    net_output.input_desc[0].shape.dim[0] = 3
    with pytest.raises(GeExecutionError, match=r"shape mismatch, expected \[3, 4\], got \[2, 4\]"):
        execute_graph(graph, inputs)


def test_run_outputs_never_alias_inputs_or_each_other(graph_builder):
    g = graph_builder()
    x = g.data("x", F32, [2])
    (y,) = g.node("id", "Identity", [x], [(F32, [2])])
    graph = g.output([y, y, x], [(F32, [2])] * 3)
    inp = torch.ones(2)
    outs = execute_graph(graph, [inp])
    pointers = {t.data_ptr() for t in outs} | {inp.data_ptr()}
    assert len(pointers) == 4
