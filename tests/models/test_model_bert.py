"""examples/bert_layer.py (plain PyTorch layers) through torch.compile(backend="npugraph").

Tolerances: the project's rule (op_plugin.testing.tolerances; op_plugin._testing_harness's "eager"
row): fp32 atol 1e-5 / rtol 1.3e-6, fp16 1e-3, bf16 1.6e-2. The model's GELU is approximate="tanh"
because GE Gelu is the tanh form (see examples/bert_layer.py); with "none" fp32 would differ from
eager by about 1e-4.
"""
import pytest
import torch

from op_plugin._testing_harness import DTYPE_IDS, Npugraph, assert_close, check_dynamic_sizes

from examples import bert_layer

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SIZES = [(2, 7), (3, 9), (5, 12)]   # (batch, sequence)
EXPECTED_OPS = {"GatherV2", "Range", "LayerNormV4", "MatMulV2", "BatchMatMul", "RealDiv", "Sxpy",
                "SoftmaxV2", "Gelu"}


def _model(dtype):
    torch.manual_seed(0)
    return bert_layer.BertLayer().to(dtype).eval()


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS.get)
def test_static_matches_eager(dtype):
    model = _model(dtype)
    compiled = Npugraph(model)
    inputs = bert_layer.example_inputs(model, *SIZES[0])
    assert inputs[1].min() == 0, "the example must contain padding"
    (op_types,) = compiled.check(inputs, no_grad=True, equal_nan=False).types_per_graph
    assert EXPECTED_OPS <= set(op_types), sorted(EXPECTED_OPS - set(op_types))
    assert compiled.compiles == 1


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS.get)
def test_dynamic_three_sizes_one_compile(dtype):
    model = _model(dtype)
    check_dynamic_sizes(model, [bert_layer.example_inputs(model, batch, seq, seed=index)
                                for index, (batch, seq) in enumerate(SIZES)], no_grad=True, equal_nan=False)


def test_padding_mask_hides_padded_tokens():
    """Compiled: changing the ids of padded positions leaves the unpadded positions' outputs alone,
    and changing an attended id does not (so the mask reaches the GE graph and is applied)."""
    model = _model(torch.float32)
    compiled = Npugraph(model)
    input_ids, attention_mask, token_types = bert_layer.example_inputs(model, 2, 7)
    attention_mask[1, 4:] = 0
    with torch.no_grad():
        base = compiled(input_ids, attention_mask, token_types)
        padded = input_ids.clone()
        padded[1, 4:] = (padded[1, 4:] + 1) % model.word.num_embeddings
        moved = compiled(padded, attention_mask, token_types)
        attended = input_ids.clone()
        attended[1, 0] = (attended[1, 0] + 1) % model.word.num_embeddings
        changed = compiled(attended, attention_mask, token_types)
    assert_close(moved[:, :4], base[:, :4], what="unpadded positions")
    assert (changed[1, 1:4] - base[1, 1:4]).abs().max() > 1e-3
