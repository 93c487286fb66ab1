"""torch_npu's MoE ops (npu/moe.py): eager == single-op graph,
bit for bit. Each eager op is an adapter over the GE kernel TorchAir's
converter lowers it to (``ge_op``), so the op called eagerly and compiled with npugraph (one node of that GE
type) must give the same bits, outputs and in-place arguments alike. Seeds: the valid calls of
``_npu_hostile_calls.VALID``."""
import pytest
import torch

from .._npu_hostile_calls import VALID
from .graph_equal import assert_eager_equals_graph

pytestmark = pytest.mark.usefixtures("torchair")

GE_TYPES = {
    "npu_moe_gating_top_k_softmax": "MoeGatingTopKSoftmax",
    "npu_moe_gating_top_k": "MoeGatingTopK",
    "npu_moe_init_routing": "MoeInitRouting",
    "npu_moe_init_routing_v2": "MoeInitRoutingV3",
    "npu_moe_finalize_routing": "MoeFinalizeRouting",
    "npu_moe_compute_expert_tokens": "MoeComputeExpertTokens",
    "npu_grouped_matmul": "GroupedMatmul",
    "npu_grouped_matmul.List": "GroupedMatmul",
}


# TorchAir's converter of npu_moe_init_routing_v2 needs active_expert_range given (it assigns from it)
SEEDS = {"npu_moe_init_routing_v2": lambda: ((torch.randn(5, 8), torch.randint(0, 4, (5, 2), dtype=torch.int32)),
                                             dict(active_num=10, expert_num=4, expert_tokens_num_type=1,
                                                  expert_tokens_num_flag=True, active_expert_range=[0, 4]))}


@pytest.mark.parametrize("name", sorted(GE_TYPES))
def test_eager_equals_single_op_graph(name):
    torch.manual_seed(0)
    args, kwargs = SEEDS.get(name, VALID[name])()
    op = getattr(torch.ops.npu, name.split(".")[0])
    if "." in name:
        op = getattr(op, name.split(".")[1])

    def fn(*tensors):
        return op(*tensors, **kwargs)

    assert_eager_equals_graph(fn, list(args), GE_TYPES[name])
