"""In-place ops that return nothing (`-> ()`) and mutate several arguments, as KV-cache writes do:
eager, fake tensors, opcheck, npugraph (static and dynamic), the IR prototype and msOpGen agree."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import op_plugin
from op_plugin import _registry
from op_plugin._registry import state
from op_plugin._registry.load import unload
from op_plugin._spec.ge_prototype import ge_outputs, ir_prototype
from op_plugin._tools.ascend_c.msopgen import op_json

YAML = """\
ops:
  - func: npu_user_cache_write_(Tensor(a!) value_cache, Tensor(b!) key_cache, Tensor value, Tensor key, \
Tensor slots) -> ()
    dtypes: {key_cache: [float32, float16], value_cache: [float32, float16], key: [float32, float16],
             value: [float32, float16], slots: [int64]}
    ge: {type: NpuUserCacheWrite}
"""


def cache_write(value_cache, key_cache, value, key, slots):   # values first: not the sorted order
    key_cache.index_copy_(0, slots, key)
    value_cache.index_copy_(0, slots, value)


@pytest.fixture
def cache_op(tmp_path):
    path = tmp_path / "cache.yaml"
    path.write_text(YAML)
    op_plugin.reference("npu_user_cache_write_")(cache_write)
    op_plugin.load_yaml(path)
    yield torch.ops.npu.npu_user_cache_write_
    unload("npu_user_cache_write_")
    _registry.detach("npu_user_cache_write_", "reference")


def _inputs(rows=6, new=2, width=4):
    return (torch.zeros(rows, width), torch.zeros(rows, width), torch.randn(new, width), torch.randn(new, width),
            torch.randperm(rows)[:new])


def test_eager_fake_and_opcheck(cache_op):
    kc, vc, k, v, s = _inputs()
    assert cache_op(kc, vc, k, v, s) is None
    assert torch.equal(kc[s], k) and torch.equal(vc[s], v)
    with FakeTensorMode() as mode:
        assert cache_op(*(mode.from_tensor(t) for t in _inputs())) is None
    torch.library.opcheck(cache_op.default, _inputs())


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_npugraph_updates_every_mutated_argument(cache_op, dynamic):
    def step(kc, vc, k, v, s):
        cache_op(kc, vc, k, v, s)
        return (kc * 2).sum(0), vc.sum(0)

    torch._dynamo.reset()
    compiled = torch.compile(step, backend="npugraph", fullgraph=True, dynamic=dynamic)
    for rows, new in ((6, 2), (8, 3)) if dynamic else ((6, 2),):
        inputs = _inputs(rows, new)
        eager_inputs = [t.clone() for t in inputs]
        expected = step(*eager_inputs)
        got = compiled(*inputs)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(inputs[0], eager_inputs[0])   # the caches were written in place
        torch.testing.assert_close(inputs[1], eager_inputs[1])


def test_prototype_converter_and_msopgen_list_the_ref_outputs_in_one_order(cache_op):
    spec = state("npu_user_cache_write_").spec
    assert ge_outputs(spec) == ["value_cache", "key_cache"]
    assert [name for name, _ in ir_prototype(spec).outputs] == ["value_cache", "key_cache"]
    entry = op_json(spec)
    assert [o["name"] for o in entry["output_desc"]] == ["value_cache", "key_cache"]
    by_name = {i["name"]: i["type"] for i in entry["input_desc"]}
    assert all(o["type"] == by_name[o["name"]] for o in entry["output_desc"])
