"""Zoo graph (ii) of issue 23: a DeepSeek-style MoE layer written with torch_npu's fused ops, as vllm-ascend's
MoE path calls them: router linear, npu_moe_gating_top_k_softmax (or grouped-sigmoid npu_moe_gating_top_k with
a correction bias), npu_moe_init_routing (v1, with npu_moe_compute_expert_tokens) or npu_moe_init_routing_v2
(token counts), npu_grouped_matmul for gate/up and down with npu_swiglu between, npu_moe_finalize_routing, and
a shared expert. Compiled with backend="npugraph" in GE mode (static, and dynamic=True over token counts with
one compile) and in aclgraph mode, it must match eager and an independent dense MoE in plain torch (per
token: its top-k experts, each expert's SwiGLU MLP, the weighted sum), computed on CPU tensors.

With --zoo-device npu the layer and the tokens live on the virtual NPU (eager on its kernels, the graphs on npu
tensors, the aclgraph mode captured into torch.npu.NPUGraph and replayed)."""
import copy

import pytest
import torch
import torch._dynamo.testing

import op_plugin
from op_plugin._simulator import load_torchair
from op_plugin._simulator.hosting.native_stub import capture_graphs

npu = torch.ops.npu
HIDDEN, INTER, SHARED, EXPERTS, TOP_K, GROUPS, TOPK_GROUPS = 32, 16, 24, 8, 2, 4, 2
ATOL = 1e-4
GE_TYPES = {"v1": ["MoeGatingTopKSoftmax", "MoeInitRouting", "MoeComputeExpertTokens", "GroupedMatmul",
                   "MoeFinalizeRoutingV2"],
            "v2": ["MoeGatingTopK", "MoeInitRoutingV3", "GroupedMatmul", "MoeFinalizeRoutingV2"]}


@pytest.fixture(scope="module", autouse=True)
def torch_npu_ops():
    load_torchair()  # defines torch_npu's ops on this CPU host


class DeepSeekMoE(torch.nn.Module):
    """routing "v1": softmax top-k, init_routing v1, cumulative group_list, the shared expert as finalize's skip1;
    routing "v2": DeepSeek-V3's grouped sigmoid gate with a correction bias and renormalised weights,
    init_routing_v2 with token counts, the shared expert added after finalize. active_num is -1 (every row), or
    with `vllm_active_num` tokens * top_k as vllm-ascend passes it."""

    def __init__(self, routing, vllm_active_num=False):
        super().__init__()
        torch.manual_seed(0)
        self.routing, self.vllm_active_num = routing, vllm_active_num
        self.router = torch.nn.Linear(HIDDEN, EXPERTS, bias=False)
        self.correction_bias = torch.nn.Parameter(torch.randn(EXPERTS) * 0.1)
        self.gate_up = torch.nn.Parameter(torch.randn(EXPERTS, HIDDEN, 2 * INTER) * 0.2)
        self.down = torch.nn.Parameter(torch.randn(EXPERTS, INTER, HIDDEN) * 0.2)
        self.shared_gate_up = torch.nn.Linear(HIDDEN, 2 * SHARED, bias=False)
        self.shared_down = torch.nn.Linear(SHARED, HIDDEN, bias=False)

    def shared(self, x):
        return self.shared_down(npu.npu_swiglu(self.shared_gate_up(x), -1))

    def experts(self, rows, group_list, group_list_type):
        def gmm(x, w):
            return npu.npu_grouped_matmul([x], [w], group_list=group_list, split_item=2, group_type=0,
                                          group_list_type=group_list_type)[0]
        return gmm(npu.npu_swiglu(gmm(rows, self.gate_up), -1), self.down)

    def forward(self, x):
        logits = self.router(x)
        if self.routing == "v1":
            weights, experts, row_idx = npu.npu_moe_gating_top_k_softmax(logits, None, k=TOP_K)
            rows, expanded_row_idx, sorted_experts = npu.npu_moe_init_routing(x, row_idx, experts, 1 << 20)
            ends = npu.npu_moe_compute_expert_tokens(sorted_experts, EXPERTS).to(torch.int64)
            out = self.experts(rows, ends, 0)
            return npu.npu_moe_finalize_routing(out, self.shared(x), None, None, weights, expanded_row_idx, experts)
        weights, experts, _ = npu.npu_moe_gating_top_k(
            logits, TOP_K, bias=self.correction_bias, k_group=TOPK_GROUPS, group_count=GROUPS, group_select_mode=1,
            renorm=0, norm_type=1, routed_scaling_factor=2.5, eps=1e-20)
        rows, expanded_row_idx, counts, _ = npu.npu_moe_init_routing_v2(
            x, experts, active_num=x.shape[0] * TOP_K if self.vllm_active_num else -1, expert_num=EXPERTS,
            expert_tokens_num_type=1, expert_tokens_num_flag=True, active_expert_range=[0, EXPERTS], quant_mode=-1)
        out = self.experts(rows, counts, 1)
        routed = npu.npu_moe_finalize_routing(out, None, None, None, weights, expanded_row_idx, experts,
                                              drop_pad_mode=2)
        return routed + self.shared(x)


def dense_moe(layer, x):
    """The same layer in plain torch, token by token: no torch_npu op."""
    def swiglu(h):
        a, b = h.chunk(2, dim=-1)
        return torch.nn.functional.silu(a) * b

    logits = x @ layer.router.weight.t()
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        if layer.routing == "v1":
            probs = torch.softmax(logits[t], dim=-1)
            chosen = torch.topk(probs, TOP_K).indices
            gates = probs[chosen]
        else:  # DeepSeek-V3's noaux_tc gate
            scores = torch.sigmoid(logits[t])
            biased = (scores + layer.correction_bias).reshape(GROUPS, -1)
            best_groups = torch.topk(torch.topk(biased, 2, dim=-1).values.sum(-1), TOPK_GROUPS).indices
            mask = torch.full((GROUPS, 1), float("-inf"))
            mask[best_groups] = 0.0
            chosen = torch.topk((biased + mask).reshape(-1), TOP_K).indices
            gates = scores[chosen] / (scores[chosen].sum() + 1e-20) * 2.5
        for gate, e in zip(gates, chosen.tolist(), strict=True):
            out[t] += gate * (swiglu(x[t] @ layer.gate_up[e]) @ layer.down[e])
    shared = swiglu(x @ layer.shared_gate_up.weight.t()) @ layer.shared_down.weight.t()
    return out + shared


def _tokens(n, device="cpu"):
    return torch.randn(n, HIDDEN, generator=torch.Generator().manual_seed(n)).to(device)


def _dense(layer, x):
    """dense_moe on CPU copies of the layer and the tokens."""
    return dense_moe(copy.deepcopy(layer).cpu(), x.cpu())


def _assert_close(got, want, device, **tolerance):
    """got (on `device`) against want, compared on CPU."""
    assert got.device.type == device, got.device
    torch.testing.assert_close(got.cpu(), want.cpu(), **tolerance)


@pytest.mark.parametrize("routing", ["v1", "v2"])
def test_eager_layer_matches_the_dense_moe(routing, zoo_device):
    layer = DeepSeekMoE(routing).to(zoo_device)
    with torch.no_grad():
        x = _tokens(7, zoo_device)
        _assert_close(layer(x), _dense(layer, x), zoo_device, atol=ATOL, rtol=0)


@pytest.mark.parametrize("routing", ["v1", "v2"])
@pytest.mark.parametrize("dynamic", [False, True])
def test_ge_mode(routing, dynamic, zoo_device):
    layer = DeepSeekMoE(routing).to(zoo_device)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("npugraph")
    compiled = torch.compile(layer, backend=counter, dynamic=dynamic)
    sizes = (6, 9, 13) if dynamic else (6,)
    with torch.no_grad():
        for n in sizes:
            x = _tokens(n, zoo_device)
            with capture_graphs() as graphs:
                got = compiled(x)
            want = layer(x)
            _assert_close(got, want, zoo_device, atol=ATOL, rtol=0)
            _assert_close(got, _dense(layer, x), zoo_device, atol=ATOL, rtol=0)
            if n == sizes[0]:
                types = {op.type for graph in graphs for op in graph.op}
                assert set(GE_TYPES[routing]) <= types, sorted(types)
    assert counter.frame_count == 1, f"{counter.frame_count} compiles for token counts {sizes}"


def test_ge_mode_with_vllm_active_num_recompiles_per_token_count(zoo_device):
    """vllm-ascend passes active_num=num_tokens * top_k; torch_npu's schema declares `int active_num` (not
    SymInt), so dynamo specializes it and compiles once per token count (as on an Ascend host): still
    eager's numbers every time."""
    layer = DeepSeekMoE("v2", vllm_active_num=True).to(zoo_device)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("npugraph")
    compiled = torch.compile(layer, backend=counter, dynamic=True)
    with torch.no_grad():
        for n in (6, 9):
            x = _tokens(n, zoo_device)
            _assert_close(compiled(x), _dense(layer, x), zoo_device, atol=ATOL, rtol=0)
    assert counter.frame_count == 2


@pytest.mark.parametrize("routing", ["v1", "v2"])
def test_ge_mode_bfloat16(routing, zoo_device):
    """bfloat16 weights and tokens (as served): compiled against eager at bfloat16's tolerance, and against the
    dense MoE in float32 within bfloat16's rounding of the routed sums."""
    layer = DeepSeekMoE(routing).to(torch.bfloat16).to(zoo_device)
    torch._dynamo.reset()
    compiled = torch.compile(layer, backend="npugraph", dynamic=True)
    with torch.no_grad():
        for n in (6, 9):
            x = _tokens(n, zoo_device).to(torch.bfloat16)
            got = compiled(x)
            _assert_close(got, layer(x), zoo_device, atol=2e-2, rtol=2e-2)
            dense = _dense(layer.float(), x.float())
            layer.to(torch.bfloat16)
            _assert_close(got.float(), dense, zoo_device, atol=6e-2, rtol=2e-2)


@pytest.mark.parametrize("routing", ["v1", "v2"])
def test_aclgraph_mode(routing, zoo_device, aclgraph_calls):
    """On cpu tensors the AOT graph runs on the reference kernels (with a warning); on npu tensors each token
    count is captured into torch.npu.NPUGraph and replayed."""
    layer = DeepSeekMoE(routing).to(zoo_device)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend(op_plugin.npugraph_backend(mode="aclgraph"))
    compiled = torch.compile(layer, backend=counter, dynamic=True)
    with torch.no_grad(), aclgraph_calls() as replays:
        for n in (6, 9):
            x = _tokens(n, zoo_device)
            got = compiled(x)
            _assert_close(got, layer(x), zoo_device, atol=ATOL, rtol=0)
            _assert_close(got, _dense(layer, x), zoo_device, atol=ATOL, rtol=0)
    if replays is not None:  # npu: one replay per call, of the graph captured for its token count
        assert (len(replays), len({id(graph) for graph in replays})) == (2, 2)
    assert counter.frame_count == 1
