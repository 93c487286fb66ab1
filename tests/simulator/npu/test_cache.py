"""torch_npu's KV-cache ops (npu/cache.py): eager == single-op graph,
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
    "npu_scatter_pa_kv_cache": "ScatterPaKvCache",
    "npu_scatter_pa_kv_cache_functional": "ScatterPaKvCache",
    "npu_kv_rmsnorm_rope_cache": "KvRmsNormRopeCache",
    "npu_kv_rmsnorm_rope_cache_v2": "KvRmsNormRopeCache",
    "npu_kv_rmsnorm_rope_cache_v2_functional": "KvRmsNormRopeCache",
    "npu_scatter_list": "ScatterList",
}


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
