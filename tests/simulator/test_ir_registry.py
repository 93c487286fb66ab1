"""GE IR prototypes: what the simulator answers for get_registered_ir_def, and a custom op end to end."""

import pytest
import torch

from op_plugin._ge.ir import IrPrototype
from op_plugin._simulator import capture_graphs, register_ge_kernel, register_ir_prototype
from op_plugin._simulator.hosting.ir_registry import get_registered_ir_def


def test_register_answer_and_remove():
    proto = IrPrototype(
        "SimTestOp",
        inputs=[("x", "required"), ("bias", "optional"), ("rest", "dynamic")],
        outputs=[("y", "required")],
        attrs=[("alpha", "VT_FLOAT"), ("dims", "VT_LIST_INT")],
    )
    handle = register_ir_prototype(proto)
    try:
        status, inputs, outputs, attrs = get_registered_ir_def("SimTestOp")
        assert status == "SUCCESS"
        assert inputs == [("x", "required"), ("bias", "optional"), ("rest", "dynamic")]
        assert outputs == [("y", "required")] and attrs == [("alpha", "VT_FLOAT"), ("dims", "VT_LIST_INT")]
        again = register_ir_prototype(proto)  # equal prototype: fine, counted
        again.destroy()
        assert get_registered_ir_def("SimTestOp")[0] == "SUCCESS"
        with pytest.raises(ValueError, match="already registered"):
            register_ir_prototype(IrPrototype("SimTestOp", inputs=[("x", "required")]))
    finally:
        handle.destroy()
    assert get_registered_ir_def("SimTestOp") == ("ERROR", [], [], [])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(inputs=[("x", "sometimes")]), "kind 'sometimes'"),
        (dict(outputs=[("y", "optional")]), "kind 'optional'"),
        (dict(attrs=[("a", "VT_COMPLEX")]), "kind 'VT_COMPLEX'"),
        (dict(inputs=[("x", "required"), ("x", "optional")]), "listed twice"),
    ],
)
def test_invalid_prototypes_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        IrPrototype("Bad", **kwargs)


def test_custom_op_through_torchair_custom_op_and_the_executor(torchair):
    from torchair import ge
    from torchair.configs.compiler_config import CompilerConfig

    lib = torch.library.Library("opsim_test", "FRAGMENT")
    lib.define("scale_add(Tensor x, Tensor y, float alpha) -> Tensor")
    lib.impl("scale_add", lambda x, y, alpha: x + alpha * y, "CompositeExplicitAutograd")
    lib.impl("scale_add", lambda x, y, alpha: torch.empty_like(x), "Meta")

    @torchair.register_fx_node_ge_converter(torch.ops.opsim_test.scale_add.default)
    def _convert(x, y, alpha, meta_outputs=None):
        return ge.custom_op("ScaleAddForTest", inputs={"x": x, "y": y}, outputs=["z"],
                            attrs={"alpha": ge.attr.Float(alpha)})

    def fn(a, b):
        return torch.ops.opsim_test.scale_add(torch.relu(a), b, 0.5)

    a, b = torch.randn(3, 4), torch.randn(3, 4)
    proto = register_ir_prototype(IrPrototype(
        "ScaleAddForTest", inputs=[("x", "required"), ("y", "required")], outputs=[("z", "required")],
        attrs=[("alpha", "VT_FLOAT")],
    ))
    kernel = register_ge_kernel("ScaleAddForTest", lambda x1, x2, *, alpha: x1 + alpha * x2)
    try:
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend=torchair.get_npu_backend(compiler_config=CompilerConfig()))
        with capture_graphs() as graphs:
            got = compiled(a, b)
        torch.testing.assert_close(got, fn(a, b))
        assert [op.type for op in graphs[0].op] == ["Data", "Data", "Relu", "ScaleAddForTest", "NetOutput"]
    finally:
        kernel.destroy()
        proto.destroy()
        torch._dynamo.reset()
