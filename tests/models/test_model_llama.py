"""examples/llama_block.py through torch.compile(backend="npugraph"): the GE graph TorchAir builds
from the shipped ops' mappings, run by the simulator, must match eager (reference kernels).

Tolerances: the project's rule (op_plugin.testing.tolerances; op_plugin._testing_harness's "eager"
row): fp32 atol 1e-5 / rtol 1.3e-6, fp16 1e-3, bf16 1.6e-2. Gradients (fp32) use the fp32 tolerances too.
"""
import pytest
import torch

from op_plugin._simulator import capture_graphs
from op_plugin._testing_harness import DTYPE_IDS, Npugraph, assert_close, check_dynamic_sizes

from examples import llama_block

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (batch, new tokens, first position): three shapes, none of size 1 (1 specialises)
SIZES = [(2, 5, 3), (3, 6, 7), (4, 7, 11)]
CACHED_OPS = {"RmsNorm", "AddRmsNorm", "RotaryMul", "BatchMatMulV2", "Swish", "NpuCustomKvCacheUpdate",
              "BatchMatMul", "SoftmaxV2", "Range", "LessEqual", "MaskedFill"}
UNCACHED_OPS = {"RmsNorm", "AddRmsNorm", "RotaryMul", "BatchMatMulV2", "Swish", "NpuCustomScaledSoftmax"}


def _model(use_cache, dtype):
    torch.manual_seed(0)
    return llama_block.LlamaBlock(use_cache=use_cache).to(dtype).eval()


def _check_keywords(model):
    """Compiled vs eager under no_grad; the caches (inputs 4 and 5) must be updated in place alike."""
    return dict(no_grad=True, equal_nan=False, mutated=(4, 5) if model.use_cache else ())


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS.get)
@pytest.mark.parametrize("use_cache", [True, False], ids=["kv_cache", "no_cache"])
def test_static_matches_eager(use_cache, dtype):
    model = _model(use_cache, dtype)
    compiled = Npugraph(model)
    inputs = llama_block.example_inputs(model, *SIZES[0], dtype=dtype)
    before = inputs[4].clone() if use_cache else None
    run = compiled.check(inputs, **_check_keywords(model))
    (op_types,) = run.types_per_graph
    expected = CACHED_OPS if use_cache else UNCACHED_OPS
    assert expected <= set(op_types), sorted(expected - set(op_types))
    assert compiled.compiles == 1
    if use_cache:   # the compiled call's new keys landed at positions 3..7 and nowhere else
        batch, seq, start = SIZES[0]
        changed = (run.args[4] != before).flatten(2).any(-1).any(0).nonzero().flatten().tolist()
        assert changed == list(range(start, start + seq))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS.get)
@pytest.mark.parametrize("use_cache", [True, False], ids=["kv_cache", "no_cache"])
def test_dynamic_three_sizes_one_compile(use_cache, dtype):
    model = _model(use_cache, dtype)
    check_dynamic_sizes(model, [llama_block.example_inputs(model, batch, seq, start, dtype=dtype, seed=index)
                                for index, (batch, seq, start) in enumerate(SIZES)], **_check_keywords(model))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_training_gradients_match_eager(dynamic):
    """Forward + backward through npugraph (train mode) give eager's loss and gradients."""
    torch.manual_seed(0)
    model = llama_block.LlamaBlock(use_cache=False).train()
    compiled = Npugraph(model, dynamic=dynamic)
    sizes = SIZES if dynamic else SIZES[:1]

    graph_count = 0
    for index, (batch, seq, start) in enumerate(sizes):
        x, cos, sin = llama_block.example_inputs(model, batch, seq, start, seed=index)
        results = []
        for run in (compiled, model):
            model.zero_grad(set_to_none=True)
            leaf = x.clone().requires_grad_(True)
            with capture_graphs() as graphs:
                loss = run(leaf, cos, sin).square().mean()
                loss.backward()
            if run is compiled:
                graph_count += len(graphs)
            grads = {name: p.grad.clone() for name, p in model.named_parameters()}
            results.append((loss.detach(), leaf.grad.clone(), grads))
        (loss, grad_x, grads), (want_loss, want_grad_x, want_grads) = results
        assert_close(loss, want_loss, what="loss")
        assert_close(grad_x, want_grad_x, what="grad x")
        assert set(grads) == set(want_grads) and len(grads) == 10
        for name in grads:
            assert want_grads[name].abs().sum() > 0, name
            assert_close(grads[name], want_grads[name], what=f"grad {name}")
    assert compiled.compiles == 1
    assert graph_count == 2   # one forward and one backward GE graph, reused for every size
