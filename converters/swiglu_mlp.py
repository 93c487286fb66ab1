"""npu_swiglu_mlp lowered to built-in GE ops (no single CANN op computes it).

silu(x @ gate_weight) * (x @ up_weight) = Swish(BatchMatMulV2(x, gate)) * BatchMatMulV2(x, up);
Swish with scale 1.0 is silu. This shows the converter escape hatch: a hand-written converter
replaces the YAML `ge:` mapping and may build any GE subgraph.
"""
# User code writes @op_plugin.converter; the shipped pieces load while op_plugin itself is being
# imported, so they take the decorator from its module rather than from the half-made package.
from op_plugin._registry.decorators import converter


@converter("npu_swiglu_mlp")
def swiglu_mlp_to_ge(x, gate_weight, up_weight, meta_outputs=None):
    from torchair._ge_concrete_graph import ge_apis as ge  # on the backend's path: TorchAir is loaded

    gate = ge.BatchMatMulV2(x, gate_weight, None, None, adj_x1=False, adj_x2=False)
    up = ge.BatchMatMulV2(x, up_weight, None, None, adj_x1=False, adj_x2=False)
    return ge.Mul(ge.Swish(gate, scale=1.0), up)
