"""The simulator test harness (op_plugin/_testing_harness.py) itself: nodes laid out as TorchAir lays
them out, attrs typed by the prototype, one tolerance table whose "eager" row is the project's rule,
and a compiled-vs-eager check that can fail."""
import pytest
import torch

from op_plugin._simulator import GeExecutionError
from op_plugin._testing_harness import (TOLERANCES, Const, assert_close, build_node_graph, check_compiled,
                                        run_node, tolerance)
from op_plugin.testing import tolerances as project_tolerances

F32, F16, BF16, F64, I32 = torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32


def _node(graph, name="op"):
    return next(op for op in graph.op if op.name == name)


def test_inputs_are_named_after_the_prototype_and_unfed_optionals_are_written():
    x1, x2 = torch.randn(2, 3), torch.randn(3, 4)
    graph, feeds = build_node_graph("MatMulV3", [x1, x2], [(F32, [2, 4])], transpose_x1=False)
    op = _node(graph)
    assert [d.name for d in op.input_desc] == ["x1", "x2", "bias", "offset_w"]
    assert list(op.input)[2:] == ["", ""]  # TorchAir writes every optional input, unfed as ""
    assert all(d.attr["_is_unfed_optional"].i == 1 and d.dtype == 0 for d in op.input_desc[2:])
    assert [d.name for d in op.output_desc] == ["y"] and len(feeds) == 2
    assert graph.attr["_output_dtypes"].list.i == [0]  # DT_FLOAT, the GE enum


def test_a_dynamic_input_is_a_list_named_x0_x1_and_consts_are_const_nodes():
    graph, feeds = build_node_graph("ConcatV2", [[torch.ones(2), Const(torch.zeros(3))], Const(torch.tensor(0))],
                                    [(F32, [5])], N=2)
    op = _node(graph)
    assert [d.name for d in op.input_desc] == ["x0", "x1", "concat_dim"]
    producers = {o.name: o.type for o in graph.op}
    assert [producers[ref.split(":")[0]] for ref in op.input] == ["Data", "Const", "Const"]
    assert len(feeds) == 1
    (got,) = run_node("ConcatV2", {"x": [torch.ones(2), Const(torch.zeros(3))], "concat_dim": Const(torch.tensor(0))},
                      [(F32, [5])], N=2)
    assert got.tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]
    with pytest.raises(TypeError, match="dynamic"):
        build_node_graph("ConcatV2", [torch.ones(2), Const(torch.tensor(0))], [(F32, [2])])


def test_attrs_are_encoded_as_the_prototype_types_them():
    x = torch.randn(2, 3)
    op = _node(build_node_graph("LpNormV2", [x], p=2, axes=[1], keepdim=True, epsilon=0)[0])
    assert op.attr["p"].WhichOneof("value") == "f" and op.attr["p"].f == 2.0  # an int for a VT_FLOAT attr
    assert list(op.attr["axes"].list.i) == [1] and op.attr["axes"].list.val_type == 2
    assert op.attr["keepdim"].b is True and op.attr["epsilon"].f == 0.0
    op = _node(build_node_graph("ReduceMeanD", [x], axes=[])[0])
    assert op.attr["axes"].WhichOneof("value") == "list" and list(op.attr["axes"].list.i) == []
    op = _node(build_node_graph("Real", [torch.randn(2, dtype=torch.complex64)], Tout=F64)[0])
    assert op.attr["Tout"].WhichOneof("value") == "dt" and op.attr["Tout"].dt == 11  # DT_DOUBLE
    op = _node(build_node_graph("GeluV2", [x], approximate="tanh")[0])
    assert op.attr["approximate"].s == b"tanh"


def test_layouts_go_on_the_data_node_and_the_node_input():
    x, w = torch.randn(1, 5, 5, 2), torch.randn(3, 3, 2, 4)
    graph, _ = build_node_graph("Conv2D", [x, w], layouts={"x": "NHWC", "filter": "HWCN"})
    op = _node(graph)
    assert [d.layout for d in op.input_desc[:2]] == ["NHWC", "HWCN"]
    data = {o.name: o for o in graph.op if o.type == "Data"}
    assert data[op.input[0].split(":")[0]].output_desc[0].layout == "NHWC"


def test_the_executor_checks_the_declared_outputs_and_names_the_node():
    with pytest.raises(GeExecutionError, match="shape mismatch"):
        run_node("Relu", [torch.randn(3)], [(F32, [4])])
    with pytest.raises(GeExecutionError, match="dtype mismatch"):
        run_node("Relu", [torch.randn(3)], [(F16, [3])])
    with pytest.raises(GeExecutionError, match=r"node 'probe'"):
        run_node("GLU", [torch.rand(2, 3)], [(F32, [2, 1])], name="probe", dim=1)


def test_one_table_whose_eager_row_is_the_projects_rule():
    for dtype in (F32, F16, BF16, F64, I32, torch.int64, torch.bool, torch.complex64):
        assert tolerance("eager", dtype) == project_tolerances(dtype)
    assert TOLERANCES["eager"] == {}
    for kind, row in TOLERANCES.items():
        assert all(dtype.is_floating_point or dtype.is_complex for dtype in row), kind  # integers stay exact
        for dtype in (I32, torch.bool):
            assert tolerance(kind, dtype) == dict(rtol=0, atol=0)
    assert tolerance("grad", F16, scale=4.0) == dict(rtol=4e-3, atol=4e-3)
    with pytest.raises(KeyError):
        tolerance("no such kind", F32)


def test_assert_close_compares_shape_dtype_and_values():
    assert_close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-6]))
    with pytest.raises(AssertionError, match="dtype"):
        assert_close(torch.ones(2, dtype=F64), torch.ones(2))
    with pytest.raises(AssertionError, match="shape"):
        assert_close(torch.ones(2), torch.ones(1, 2))
    with pytest.raises(AssertionError):
        assert_close(torch.tensor([1.0]), torch.tensor([1.001]))
    assert_close(torch.tensor([1.0]), torch.tensor([1.001]), "torchair")
    with pytest.raises(AssertionError, match="2 results, expected 1"):
        assert_close([torch.ones(1), torch.ones(1)], [torch.ones(1)])


def test_check_compiled_fails_on_a_missing_ge_type_or_a_wrong_oracle():
    x = torch.randn(4)
    run = check_compiled(torch.relu, (x,), "Relu")
    assert "Relu" in run.ge_types and run.graphs and torch.equal(run.got, run.want)
    with pytest.raises(AssertionError, match="not in the graphs"):
        check_compiled(torch.relu, (x,), "Sigmoid")
    with pytest.raises(AssertionError):
        check_compiled(torch.relu, (x,), oracle=torch.sigmoid)
