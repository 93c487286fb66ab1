"""GE dtypes the simulator has no torch dtype for (issue 23): the error names the node and the dtype,
whether the graph comes from TorchAir (npu_dynamic_mx_quant's fp4 e1m2 output, DT_FLOAT4_E1M2 = 40: torch has
no dtype to carry it) or is hand-built; never a bare ValueError from the dtype table."""
import pytest
import torch

from op_plugin._ge.values import PROTO_DTYPE_NAMES, UnsupportedGeDtype, ge_dtype_to_torch, proto_dtype_to_torch
from op_plugin._simulator.interpreter.errors import GeExecutionError

pytestmark = pytest.mark.usefixtures("torchair")


def test_the_dtype_tables_name_what_they_cannot_map():
    assert PROTO_DTYPE_NAMES[40] == "DT_FLOAT4_E1M2" and PROTO_DTYPE_NAMES[33] == "DT_HIFLOAT8"
    with pytest.raises(UnsupportedGeDtype, match=r"DT_FLOAT4_E1M2 \(number 40 of the protobuf enum"):
        proto_dtype_to_torch(40)
    with pytest.raises(UnsupportedGeDtype, match=r"DT_HIFLOAT8 \(number 34 of the GE enum"):
        ge_dtype_to_torch(34)
    with pytest.raises(UnsupportedGeDtype, match="not a GE dtype"):
        proto_dtype_to_torch(99)


def test_dynamic_mx_quant_compiled_names_the_node_and_dtype():
    compiled = torch.compile(lambda x: torch.ops.npu.npu_dynamic_mx_quant(x, dst_type=297), backend="npugraph")
    with pytest.raises(GeExecutionError) as error:
        compiled(torch.randn(4, 64))
    message = str(error.value)
    assert "DynamicMxQuant" in message and "output 0" in message and "DT_FLOAT4_E1M2" in message
