"""Shared fixtures for the simulator tests: TorchAir loaded once, GE graph builders."""

import pytest
import torch

from op_plugin._simulator import load_torchair


@pytest.fixture(scope="session")
def torchair():
    return load_torchair()


@pytest.fixture(scope="session")
def ge_ir(torchair):
    from torchair._ge_concrete_graph import ge_ir_pb2

    return ge_ir_pb2


class GraphBuilder:
    """Builds small GE GraphDefs by hand, the way TorchAir lays them out."""

    # protobuf-enum dtype numbers (TensorDescriptor.dtype)
    PROTO = {torch.float32: 1, torch.float16: 2, torch.int8: 3, torch.uint8: 4, torch.int32: 7, torch.int64: 8,
             torch.bool: 11, torch.bfloat16: 27}

    def __init__(self, ge_ir, name="hand_built"):
        self.graph = ge_ir.GraphDef(name=name)
        self._inputs = 0

    def _desc(self, desc, dtype, shape, meta=True):
        desc.dtype = self.PROTO[dtype]
        desc.layout = "ND"
        if shape is not None:
            desc.shape.dim.extend(shape)
            desc.shape.SetInParent()
        if meta:  # TorchAir marks descs whose dtype comes from an FX meta
            desc.attr["_meta"].s = b"Tensor(...)"

    def data(self, name, dtype, shape):
        op = self.graph.op.add(name=name, type="Data")
        op.attr["index"].i = self._inputs
        self._inputs += 1
        self._desc(op.input_desc.add(name="x"), dtype, shape)
        self._desc(op.output_desc.add(name="y"), dtype, shape)
        return f"{name}:0"

    def const(self, name, tensor):
        op = self.graph.op.add(name=name, type="Const")
        value = op.attr["value"].t
        value.desc.dtype = self.PROTO[tensor.dtype]
        value.desc.shape.dim.extend(tensor.shape)
        value.desc.shape.SetInParent()
        value.data = tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()  # raw little-endian bytes, as TorchAir writes them
        op.output_desc.add().CopyFrom(value.desc)
        return f"{name}:0"

    def node(self, name, op_type, inputs, outputs, **attrs):
        """outputs: list of (dtype, shape or None); attrs: python ints/floats/bools/lists of int."""
        op = self.graph.op.add(name=name, type=op_type)
        op.input.extend(inputs)
        for i, _ in enumerate(inputs):
            op.input_desc.add(name=f"x{i}")
        for i, (dtype, shape) in enumerate(outputs):
            self._desc(op.output_desc.add(name=f"y{i}"), dtype, shape)
        for key, value in attrs.items():
            if isinstance(value, bool):
                op.attr[key].b = value
            elif isinstance(value, int):
                op.attr[key].i = value
            elif isinstance(value, float):
                op.attr[key].f = value
            else:
                op.attr[key].list.i.extend(value)
                op.attr[key].list.val_type = 2
        return [f"{name}:{i}" for i in range(len(outputs))]

    def output(self, inputs, outputs, ge_dtypes=None):
        op = self.graph.op.add(name="NetOutput", type="NetOutput")
        op.input.extend(inputs)
        for dtype, shape in outputs:
            self._desc(op.input_desc.add(), dtype, shape, meta=False)
        if ge_dtypes is not None:
            self.graph.attr["_output_dtypes"].list.i.extend(ge_dtypes)
        return self.graph


@pytest.fixture
def graph_builder(ge_ir):
    return lambda name="hand_built": GraphBuilder(ge_ir, name)
