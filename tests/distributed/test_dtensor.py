"""DTensor tensor parallelism (`parallelize_module` with ColwiseParallel / RowwiseParallel) compiled
with npugraph on 2 gloo ranks, in GE mode and in aclgraph mode, static and dynamic.

In GE mode TorchAir fails on the DeviceMesh objects AOT passes beside each DTensor's local tensor
(two TorchAir bugs, host-independent; fixed on both hosts by
op_plugin/_lowering/torchair_input_fixes.py). A Megatron-style decoder block (attention with
q/k/v column-parallel and the output projection row-parallel, then a column/row-parallel MLP) is
compared on every rank with eager (the same parallelized module, not compiled) and with the
unsharded block; a training step compares the gradients of the local shards with the unsharded
block's. The same for a transformers LlamaDecoderLayer under the tensor-parallel plan transformers
declares for Llama (fullgraph, inference and a training step)."""
import pytest
import torch
import torch.distributed as dist

HIDDEN, HEADS, FFN = 16, 4, 32


class DecoderBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = torch.nn.LayerNorm(HIDDEN), torch.nn.LayerNorm(HIDDEN)
        self.q, self.k, self.v = (torch.nn.Linear(HIDDEN, HIDDEN) for _ in range(3))
        self.o = torch.nn.Linear(HIDDEN, HIDDEN)
        self.fc1, self.fc2 = torch.nn.Linear(HIDDEN, FFN), torch.nn.Linear(FFN, HIDDEN)

    def forward(self, x):
        batch, seq, _ = x.shape
        h = self.norm1(x)
        # heads stay local under tensor parallelism: -1 is the number of this rank's heads
        q, k, v = (proj(h).view(batch, seq, -1, HIDDEN // HEADS).transpose(1, 2) for proj in (self.q, self.k, self.v))
        scores = q @ k.transpose(-1, -2) / (HIDDEN // HEADS) ** 0.5
        causal = torch.ones(seq, seq, dtype=torch.bool).tril()
        attention = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
        x = x + self.o(attention.transpose(1, 2).reshape(batch, seq, -1))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm2(x)), approximate="tanh"))


def _block_pair():
    """The unsharded block and a copy parallelized over all ranks (same weights on every rank)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(5)
    unsharded = DecoderBlock()
    parallel = DecoderBlock()
    parallel.load_state_dict(unsharded.state_dict())
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    plan = {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(), "o": RowwiseParallel(),
            "fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    return unsharded, parallelize_module(parallel, mesh, plan)


def _batch(rows: int, seq: int = 5) -> torch.Tensor:
    return torch.randn(rows, seq, HIDDEN, generator=torch.Generator().manual_seed(rows))


# ---- cases (run on every rank) ----------------------------------------------------------------------

def inference_case(mode, dynamic):
    unsharded, parallel = _block_pair()
    compiled = torch.compile(parallel, backend="npugraph", options={"mode": mode}, dynamic=dynamic)
    differences = []
    with torch.no_grad():
        for rows in ([2, 4] if dynamic else [2]):  # even: DTensor's sharding guards x.size(0) % 2 == 0
            x = _batch(rows)
            out = compiled(x)
            assert type(out) is torch.Tensor, type(out)  # RowwiseParallel hands back a replicated local tensor
            torch.testing.assert_close(out, parallel(x), rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(out, unsharded(x), rtol=1e-5, atol=1e-5)
            differences.append(float((out - unsharded(x)).abs().max()))
    return differences


def training_case(mode, dynamic):
    """One forward and backward: every parameter's gradient (a DTensor shard) equals the matching
    slice of the unsharded block's gradient."""
    unsharded, parallel = _block_pair()
    compiled = torch.compile(parallel, backend="npugraph", options={"mode": mode}, dynamic=dynamic)
    x = _batch(2)
    compiled(x).square().mean().backward()
    unsharded(x).square().mean().backward()
    for name, param in parallel.named_parameters():
        expected = dict(unsharded.named_parameters())[name].grad
        grad = param.grad.full_tensor() if hasattr(param.grad, "full_tensor") else param.grad
        torch.testing.assert_close(grad, expected, rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
    return sorted(name for name, param in parallel.named_parameters() if hasattr(param, "placements"))


# ---- tests (parent side) ---------------------------------------------------------------------------

# aclgraph mode is run static only: it runs the AOT graph with eager kernels (what dynamic shapes
# change there is torch's, not op_plugin's), and a dynamic DTensor compile costs ~25 s here.
@pytest.mark.parametrize(("mode", "dynamic"), [pytest.param("ge", False, id="ge-static"),
                                               pytest.param("ge", True, id="ge-dynamic"),
                                               pytest.param("aclgraph", False, id="aclgraph-static")])
def test_dtensor_decoder_block_inference(ranks, mode, dynamic):
    ranks(2).run(inference_case, mode, dynamic)


@pytest.mark.parametrize("mode", ["ge", "aclgraph"])
def test_dtensor_decoder_block_training_step(ranks, mode):
    sharded = ranks(2).run(training_case, mode, False)
    assert sharded[0] == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight", "k.bias", "k.weight",
                          "o.bias", "o.weight", "q.bias", "q.weight", "v.bias", "v.weight"], sharded


def test_plain_inputs_keep_torchair_positions():
    """The fix re-keys TorchAir's input attributes only where an input flattens to several: plain
    tensors and SymInts keep TorchAir's keys."""
    from op_plugin._lowering.torchair_input_fixes import flattened_input_attrs

    inputs = [torch.randn(2), 3, torch.nn.Parameter(torch.randn(3)), torch.randn(4)]
    attrs = {-2: {"_torchair_is_parameter": True}, -1: {"dim_gears": {0: [2, 4]}}}
    assert flattened_input_attrs(inputs, attrs) == attrs


def transformers_case(train):
    """A transformers LlamaDecoderLayer (tiny config) under parallelize_module with the tensor
    parallel plan transformers itself declares for Llama (q/k/v/gate/up colwise, o/down rowwise)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    config = LlamaConfig(hidden_size=HIDDEN, intermediate_size=FFN, num_attention_heads=HEADS, num_key_value_heads=2,
                         num_hidden_layers=1, attn_implementation="eager")
    torch.manual_seed(6)
    unsharded = LlamaDecoderLayer(config, layer_idx=0)
    layer = LlamaDecoderLayer(config, layer_idx=0)
    layer.load_state_dict(unsharded.state_dict())
    plan = {f"self_attn.{p}": ColwiseParallel() for p in ("q_proj", "k_proj", "v_proj")}
    plan.update({"self_attn.o_proj": RowwiseParallel(), "mlp.gate_proj": ColwiseParallel(),
                 "mlp.up_proj": ColwiseParallel(), "mlp.down_proj": RowwiseParallel()})
    parallelize_module(layer, init_device_mesh("cpu", (dist.get_world_size(),)), plan)
    x = _batch(2)
    position_embeddings = LlamaRotaryEmbedding(config)(x, torch.arange(x.shape[1]).unsqueeze(0))
    mask = torch.full((x.shape[1], x.shape[1]), float("-inf")).triu(1)[None, None]

    def run(module):
        out = module(x, attention_mask=mask, position_embeddings=position_embeddings)
        return out[0] if isinstance(out, tuple) else out

    compiled = torch.compile(layer, backend="npugraph", fullgraph=True)
    with torch.set_grad_enabled(train):
        out, eager, reference = run(compiled), run(layer), run(unsharded)
    torch.testing.assert_close(out, eager, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out, reference, rtol=1e-4, atol=1e-4)
    if train:
        out.square().mean().backward()
        reference.square().mean().backward()
        for name, param in layer.named_parameters():
            grad = param.grad.full_tensor() if hasattr(param.grad, "full_tensor") else param.grad
            torch.testing.assert_close(grad, dict(unsharded.named_parameters())[name].grad, rtol=1e-4, atol=1e-5,
                                       msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize("train", [pytest.param(False, id="inference"), pytest.param(True, id="training")])
def test_transformers_llama_decoder_layer_tensor_parallel(ranks, train):
    pytest.importorskip("transformers", reason="the zoo extra is not installed (make distributed installs it)")
    ranks(2).run(transformers_case, train)
