"""torch_npu's attention ops (npu/attention.py): eager == single-op graph,
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
    "npu_fusion_attention": "FlashAttentionScore",
    "npu_prompt_flash_attention": "PromptFlashAttention",
    "npu_incre_flash_attention": "IncreFlashAttention",
    "npu_fused_infer_attention_score": "FusedInferAttentionScore",
    "npu_fused_infer_attention_score_v2": "FusedInferAttentionScore",
    "npu_mla_prolog": "MlaProlog",
    "npu_mla_prolog_v2": "MlaPrologV2",
    "npu_mla_prolog_v3": "MlaPrologV3",
    "npu_mla_prolog_v3_functional": "MlaPrologV3",
}
# npu_fusion_attention_grad is left out: TorchAir's converter returns FlashAttentionScoreGrad's four outputs for
# the schema's five and TorchAir rejects the graph (test_npu_ops_attention_grad.py records it).


@pytest.mark.parametrize("name", sorted(GE_TYPES))
def test_eager_equals_single_op_graph(name):
    torch.manual_seed(0)
    args, kwargs = VALID[name]()
    op = getattr(torch.ops.npu, name.split(".")[0])
    if "." in name:
        op = getattr(op, name.split(".")[1])

    def fn(*tensors):
        return op(*tensors, **kwargs)

    assert_eager_equals_graph(fn, list(args), GE_TYPES[name])
