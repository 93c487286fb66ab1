"""No result depends on call order: a plan prepares each input signature once (its first, checked call) and
runs the signature's generated program after that (executor/plan.py, program.py), so everything a call's
outcome depends on beyond the signature (values: a range check, an index bound, NaN) must be decided on every
call, and nothing a call leaves behind (a cached value, a prepared call, a folded constant) may change a
later one.

* Every GE kernel with a value-dependent check or refusal (found by reading the kernels' source:
  `test_every_value_check_of_a_kernel_is_exercised_here`) runs hostile values on the first, second and later
  calls of one plan signature, with and without warm-up calls, in any order hypothesis draws: each call's
  outcome (its outputs bit for bit, or its error) equals that of a fresh plan on the same feeds; so do the same
  values in other storage (non-contiguous, stride-0), since strides are not part of a signature.
* The same through npugraph (TorchAir's graphs, the per-signature program): the fp8 cast and index range.
* Fuzzing the executor's per-signature state against eager: random sequences of calls with new and repeated
  signatures, dtypes, non-contiguous inputs, one tensor passed twice, hostile values, and the caller writing
  into an earlier call's inputs and outputs.
"""
from __future__ import annotations

import ast
import collections
import re
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from op_plugin._simulator.interpreter.executor import plan as plan_module
from op_plugin._testing_harness import Const, build_node_graph
from tests.simulator._npu_hostile_mutations import expanded, non_contiguous

pytestmark = [pytest.mark.usefixtures("torchair"),
              pytest.mark.filterwarnings("ignore:torch.searchsorted\\(\\). .*non-contiguous:UserWarning")]
F32, F16, BF16, I32, I64, I8 = torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.int8
KERNELS = Path(plan_module.__file__).resolve().parents[1] / "kernels"
LOWBIT_FORMATS = KERNELS.parent / "lowbit_formats.py"
NAN, INF = float("nan"), float("inf")


def _r(*shape, dtype=F32):
    return torch.randn(*shape).to(dtype)


# ---- the kernels with value-dependent checks ----------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One GE node whose kernel decides something from its inputs' values: `seed()` gives (inputs as
    run_node takes them, attrs); `bad` are changes of the fed values (same dtypes and shapes, so the
    signature stays the same unless a small integer input changes) that the kernel refuses; `sites` the
    value checks (kernel module:function) the case reaches."""

    op_type: str
    seed: object
    bad: tuple
    sites: tuple
    outputs: object = None


def _fill(index, value, where=None):
    """A change of feed `index`: every element (or the element at flat position `where`) set to `value`."""
    def change(feeds):
        feeds = [f.clone() for f in feeds]
        target = feeds[index]
        cast = torch.tensor(value).to(target.dtype)  # 1e30 in float16 is inf, as a cast makes it
        if where is None:
            target.fill_(cast)
        else:
            target.view(-1)[where] = cast
        return feeds

    change.label = f"feed {index} {'all' if where is None else f'[{where}]'} = {value}"
    return change


def _index_feed(n, high):
    """`n` > 16 indices (so their values are not part of the input signature) in [0, high)."""
    return torch.arange(n, dtype=I64) % high


CASES = {
    "cast-fp8": Case("Cast", lambda: ([_r(4, 5)], {"dst_type": 36}), (_fill(0, 1000.0, 3), _fill(0, NAN, 0)),
                     ("math/unary.py:_checked_fp8_cast",)),
    "gather-v2": Case("GatherV2", lambda: ([_r(6, 3), _index_feed(20, 6), Const(torch.tensor(0))], {}),
                      (_fill(1, 6, 5), _fill(1, -7, 0)), ("index/gather_scatter.py:_in_range",)),
    "gather-elements": Case("GatherElements", lambda: ([_r(3, 8), torch.randint(0, 8, (3, 8))], {"dim": 1}),
                            (_fill(1, 8, 2), _fill(1, -9, 0)), ()),
    "index-by-tensor": Case("IndexByTensor", lambda: ([_r(6, 3), [_index_feed(20, 6)]], {"indices_mask": [1]}),
                            (_fill(1, 6, 4),), ("index/gather_scatter.py:_in_range",)),
    "scatter-nd-update": Case("ScatterNdUpdate", lambda: ([_r(20, 3), _index_feed(18, 20).reshape(18, 1).to(I32),
                                                           _r(18, 3)], {}),
                              (_fill(1, 20, 3), _fill(1, -1, 0)), ("index/scatter.py:scatter_nd_update",)),
    "embedding-dense-grad": Case("EmbeddingDenseGrad", lambda: ([_r(20, 4), _index_feed(20, 5).to(I32)],
                                                                {"num_weights": 5, "padding_idx": -1}),
                                 (_fill(1, 5, 7), _fill(1, -2, 0)), ("index/embedding.py:embedding_dense_grad",)),
    "nll-loss": Case("NLLLoss", lambda: ([_r(20, 5).log_softmax(-1), _index_feed(20, 5).to(I32), torch.rand(5)],
                                         {"reduction": "mean", "ignore_index": -100}),
                     (_fill(1, 5, 3), _fill(1, -3, 0)), ("loss/loss.py:nll_loss",)),
    "nll-loss-grad": Case("NLLLossGrad", lambda: ([_r(20, 5), torch.tensor(1.0), _index_feed(20, 5).to(I32),
                                                   torch.rand(5), torch.tensor(2.0)],
                                                  {"reduction": "sum", "ignore_index": -100}),
                          (_fill(2, 9, 1),), ("loss/loss.py:nll_loss_grad",)),
    "search-sorted": Case("SearchSorted", lambda: ([torch.sort(_r(2, 20))[0], _r(2, 4),
                                                    torch.arange(20).repeat(2, 1)], {"dtype": 9}),
                          (_fill(2, 20, 5), _fill(2, -1, 0)), ("math/sort.py:search_sorted",)),
    "bernoulli": Case("StatelessBernoulli", lambda: ([Const(torch.tensor([4, 5])), torch.rand(4, 5),
                                                      Const(torch.tensor(3)), Const(torch.tensor(0))], {"dtype": 0}),
                      (_fill(0, 1.5, 2), _fill(0, NAN, 0)), ("random/random.py:stateless_bernoulli",)),
    "multinomial": Case("MultinomialWithReplacement", lambda: ([torch.rand(3, 6) + 0.1, Const(torch.tensor(5)),
                                                                Const(torch.tensor(0))],
                                                               {"numsamples": 4, "replacement": True}),
                        (_fill(0, -1.0, 2), _fill(0, 0.0), _fill(0, INF, 1)),
                        ("random/random.py:multinomial_with_replacement",)),
    "quant-max": Case("QuantMax", lambda: ([_r(3, 8) * 100, torch.tensor([2.0])], {"dst_type": 36}),
                      (_fill(0, NAN, 4),), ("quant/quant_max.py:_check_amax_defined",)),
    "dynamic-quant": Case("DynamicQuant", lambda: ([_r(3, 8, dtype=F16)], {}), (_fill(0, 0.0),),
                          ("quant/dynamic_quant.py:_symmetric",)),
    "quantize": Case("Quantize", lambda: ([_r(3, 4), torch.rand(1, 4) + 0.5, None], {"dtype": "torch.qint8",
                                                                                     "axis": 1}),
                     (_fill(1, 0.0, 2),), ("quant/dynamic_quant.py:quantize",)),
    "trans-quant-param-v2": Case("TransQuantParamV2", lambda: ([torch.rand(4), torch.rand(4)], {}),
                                 (_fill(1, 0.5, 1), _fill(1, -2.5, 3)),
                                 ("quant/dynamic_quant.py:trans_quant_param_v2",)),
    "rotate-quant": Case("RotateQuant", lambda: ([_r(2, 32, dtype=F16), _r(16, 16, dtype=F16)], {"y_dtype": 29}),
                         (_fill(0, 0.0), _fill(0, INF, 3)), ("quant/rotate_quant.py:rotate_quant",)),
    "flat-quant": Case("FlatQuant", lambda: ([_r(2, 4, 16, dtype=F16), _r(4, 4, dtype=F16), _r(16, 16, dtype=F16)],
                                             {"clip_ratio": 0.9}),
                       (_fill(0, INF, 5), _fill(0, 60000.0)), ("quant/rotate_quant.py:flat_quant",)),
    "add-rms-norm-dynamic-quant": Case("AddRmsNormDynamicQuant", lambda: ([_r(2, 8, dtype=F16), _r(2, 8, dtype=F16),
                                                                          torch.rand(8).to(F16)], {}),
                                       (_fill(2, 0.0),), ("norm/rms_norm_quant.py:add_rms_norm_dynamic_quant",)),
    "add-rms-norm-quant": Case("AddRmsNormQuant", lambda: ([_r(2, 8, dtype=F16), _r(2, 8, dtype=F16),
                                                            torch.rand(8).to(F16) + 0.5, torch.rand(8).to(F16) + 0.5],
                                                           {"div_mode": True}),
                               (_fill(3, 0.0, 2),), ("norm/rms_norm_quant.py:add_rms_norm_quant",)),
    "rms-norm-grad-quant": Case("RmsNormGradQuant", lambda: ([_r(2, 8, dtype=F16), _r(2, 8, dtype=F16),
                                                              torch.rand(2) + 0.5, torch.rand(8).to(F16),
                                                              torch.rand(1) + 0.1, None], {}),
                                (_fill(0, NAN, 3),), ("norm/rms_norm.py:quantised_grad",)),
    "quant-batch-matmul-v3": Case("QuantBatchMatmulV3", lambda: ([torch.randint(-9, 9, (3, 8), dtype=I8),
                                                                  torch.randint(-9, 9, (8, 5), dtype=I8),
                                                                  (torch.rand(5) + 0.5).view(I32).to(I64) & 0xFFFFE000,
                                                                  None, torch.randint(-9, 9, (5,), dtype=I32)],
                                                                 {"dtype": 1}),
                                  (_fill(2, 1 << 40, 1), _fill(3, 2 ** 31 - 1, 0)),
                                  ("matmul/quant_matmul.py:quant_batch_matmul_v3", "matmul/quant_matmul.py:_scale")),
    "moe-compute-expert-tokens": Case("MoeComputeExpertTokens",
                                      lambda: ([torch.arange(20, dtype=I32) // 5], {"num_experts": 4}),
                                      (_fill(0, 9, 0), _fill(0, -1, 0)), ("moe/routing.py:compute_expert_tokens",)),
    "moe-finalize-routing-v2": Case("MoeFinalizeRoutingV2",
                                    lambda: ([_r(6, 4), torch.tensor([0, 3, 1, 4, 2, 5], dtype=I32), _r(3, 4), None,
                                              _r(3, 4), torch.rand(3, 2),
                                              torch.tensor([[0, 1], [1, 2], [2, 0]], dtype=I32)], {}),
                                    (_fill(1, 9, 2), _fill(5, 7, 1)), ("moe/routing.py:finalize_routing",)),
    "scatter-pa-kv-cache": Case("ScatterPaKvCache", lambda: ([_r(2, 1, 4), _r(2, 3, 1, 4),
                                                              torch.tensor([1, 4], dtype=I32), _r(2, 1, 4),
                                                              _r(2, 3, 1, 4)], {"cache_mode": "Norm"}),
                                (_fill(2, 6, 1), _fill(2, -5, 0)), ("attention/kv_cache.py:_slots",)),
    "quant-update-scatter": Case("QuantUpdateScatter", lambda: ([torch.zeros(2, 8, 32, dtype=I8),
                                                                  torch.tensor([1, 5], dtype=I32),
                                                                  _r(2, 2, 32, dtype=F16), torch.rand(32) + 0.5, None],
                                                                 {"reduce": "update"}),
                                 (_fill(2, NAN, 7),), ("index/scatter.py:_quantised",)),
    "dynamic-mx-quant": Case("DynamicMxQuant", lambda: ([_r(2, 64, dtype=BF16)], {}), (_fill(0, INF, 9),),
                             ("quant/mx_quant.py:block_mx", "lowbit_formats.py:_refuse_non_finite",
                              "lowbit_formats.py:fp4_codes")),
    "dual-level-mx-quant": Case("DynamicDualLevelMxQuant", lambda: ([_r(2, 512, dtype=BF16), None], {}),
                                (_fill(0, NAN, 1),), ("quant/mx_quant.py:dual_level_mx",)),
    "flash-attention-score": Case("FlashAttentionScore",
                                  lambda: ({"query": _r(1, 3, 16, dtype=F16), "key": _r(1, 3, 16, dtype=F16),
                                            "value": _r(1, 3, 16, dtype=F16),
                                            "atten_mask": torch.zeros(3, 3, dtype=torch.bool)},
                                           {"input_layout": "BSH", "head_num": 2, "sparse_mode": 0}),
                                  (_fill(3, True),), ("attention/flash_attention.py:attention",),
                                  outputs=[(F32, [1, 2, 3, 8]), (F32, [1, 2, 3, 8]), (F16, [0]), (F16, [1, 3, 16])]),
}

# Value-dependent checks not run here, and why. Every other one the source has must be reached by a case.
NOT_HERE = {
    "mc2/moe_distribute.py:_expert_ids": "a collective (MoeDistributeDispatch/Combine): needs a process group; "
                                         "tests/simulator/npu/test_moe.py and tests/distributed run it",
    "mc2/moe_distribute.py:_combined": "idem (MoeDistributeCombine's and CombineV2's shared combine step)",
    "attention/flash_attention.py:attention_grad": "the same fully-masked-row check as attention (its forward)",
    "attention/infer_attention.py:_paged": "block tables of IncreFlashAttention/FusedInferAttentionScore: "
                                           "tests/simulator/npu/test_attention_inference.py",
    "attention/mla_prolog.py:mla_prolog": "MlaProlog's cache index: tests/simulator/npu/test_attention_inference.py",
    "norm/rms_norm_quant.py:check_norm_args": "RmsNormDynamicMxQuant's non-finite x: the same rule as DynamicMxQuant",
    "pooling/avg_pool.py:avg_pool_v2": "counts come from the attrs and shapes, not from values",
    "pooling/max_pool.py:_scatter_argmax": "MaxPoolGradWithArgmaxV1's argmax: tests/simulator/kernels/pooling",
    "quant/swiglu_quant.py:_rowmax_scale": "SwigluQuant (DequantSwigluQuant's row max): same rule as DynamicQuant",
    "quant/swiglu_quant.py:swiglu_mx": "SwigluMxQuant: same rule as DynamicMxQuant (and max_dtype_value, an attr)",
    "lowbit_formats.py:check_modes": "attrs (max_low_bound, scale_alg), not values",
    "quant/quant_max.py:_fp8_out": "an attr (dst_type), not values",
    "common.py:require_int8": "an attr (dst_type), not values",
    "quant/dynamic_quant.py:_int8_or_int4": "an attr (dst_type), not values",
}

_VALUE = re.compile(r"\.(any|all|item|max|min|amax|amin|aminmax|sum|tolist)\(|isfinite|isnan|isinf|\bint\(|\bfloat\(|"
                    r"\bbool\(")


def _refuses(nodes) -> bool:
    for node in nodes:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Raise):
                return True
            if isinstance(inner, ast.Call) and getattr(inner.func, "id", getattr(inner.func, "attr", None)) == "refuse":
                return True
    return False


def value_check_sites() -> set[str]:
    """"module:function" of every kernel function with an `if` on tensor values (a reduction to a Python
    value, a NaN/inf test) that refuses or raises. Tests on `.value` (a prepare phase's fixed input, part of
    the signature) are not value checks of a call."""
    sites = set()
    # the kernels, and the low-bit formats they share (interpreter/lowbit_formats.py, named by its file name)
    for path in [*sorted(KERNELS.rglob("*.py")), LOWBIT_FORMATS]:
        name = LOWBIT_FORMATS.name if path == LOWBIT_FORMATS else path.relative_to(KERNELS).as_posix()
        source = path.read_text()
        for function in ast.walk(ast.parse(source)):
            if not isinstance(function, ast.FunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.If):
                    test = ast.get_source_segment(source, node.test)
                    if _VALUE.search(test) and ".value" not in test and _refuses(node.body):
                        sites.add(f"{name}:{function.name}")
    return sites


def test_every_value_check_of_a_kernel_is_exercised_here():
    found = value_check_sites()
    covered = {site for case in CASES.values() for site in case.sites}
    missing = sorted(found - covered - set(NOT_HERE))
    assert not missing, f"kernels with value-dependent checks that no case runs (add a Case or a NOT_HERE reason): " \
                        f"{missing}"
    stale = sorted(site for site in covered | set(NOT_HERE) if site not in found)
    assert not stale, f"sites named here that the kernels no longer have: {stale}"


def _plan(graph):
    """A plan that runs each signature's generated program from its second call on (as a lowered graph's
    plan does: hand-built graphs have no FX record, which would make the plan check every call)."""
    plan = plan_module.compile_graph(graph)
    plan.fx = plan_module.FxShapes.__new__(plan_module.FxShapes)
    plan.fx.bindings, plan.fx._cache = [], {}
    plan._verified = collections.OrderedDict()
    return plan


def _bits(tensor: torch.Tensor):
    dtype = str(tensor.dtype)
    if tensor.dtype == torch.int4:  # one value per byte; torch has no int4 copy kernel
        tensor = tensor.view(torch.int8)
    tensor = torch.empty(tensor.shape, dtype=tensor.dtype).copy_(tensor.detach())  # canonical strides
    if tensor.dtype == torch.bool:
        tensor = tensor.to(torch.uint8)
    return dtype, tuple(tensor.shape), tuple(tensor.reshape(-1).view(torch.uint8).tolist())


def outcome(plan, feeds):
    """What one call gives: ("ok", outputs and the feeds after the call, bit for bit) or ("error", type,
    message). `feeds` are the call's own (a ref op may write them)."""
    try:
        outputs = plan.run(feeds)
    except Exception as error:
        return "error", type(error).__name__, str(error)
    return "ok", [_bits(t) for t in outputs], [_bits(t) for t in feeds]


def _case_graph(case: Case):
    torch.manual_seed(0)
    inputs, attrs = case.seed()
    graph, feeds = build_node_graph(case.op_type, inputs, case.outputs, name="value_node", **attrs)
    return graph, feeds


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_runs_its_seed_and_refuses_its_bad_values(name):
    case = CASES[name]
    graph, feeds = _case_graph(case)
    first = outcome(_plan(graph), [f.clone() for f in feeds])
    assert first[0] == "ok", f"{name}: the seed is refused: {first}"
    for change in case.bad:
        got = outcome(_plan(graph), change(feeds))
        assert got[0] == "error" and "value_node" in got[2], f"{name} [{change.label}]: not refused by name: {got}"


def _hostile_changes(feeds, data):
    """A change hypothesis draws: one feed (or one element of it) set to a hostile value of its dtype."""
    index = data.draw(st.integers(0, len(feeds) - 1), label="feed")
    feed = feeds[index]
    if feed.dtype.is_floating_point:
        value = data.draw(st.sampled_from([NAN, INF, -INF, 0.0, -0.0, 1e30, -1e30, 448.5, 65504.0, 1.0]), label="v")
    elif feed.dtype == torch.bool:
        value = data.draw(st.booleans(), label="v")
    else:
        info = torch.iinfo(feed.dtype)
        value = data.draw(st.sampled_from([-1, 0, 1, 7, info.max, info.min, -(2 ** 7)]), label="v")
    where = data.draw(st.one_of(st.none(), st.integers(0, max(feed.numel() - 1, 0))), label="where")
    return _fill(index, value, None if feed.numel() == 0 else where)


def _seed_feeds(feeds):
    change = lambda f: [t.clone() for t in f]  # noqa: E731
    change.label = "seed"
    return change


def _layout_change(index, kind):
    """Feed `index`'s values in other storage: strides are not part of a signature, so a later call of the
    signature runs the program prepared for the first call's layout."""
    def change(feeds):
        feeds = [f.clone() for f in feeds]
        feeds[index] = (non_contiguous if kind == "non-contiguous" else expanded)(feeds[index])
        return feeds

    change.label = f"feed {index} {kind}"
    return change


def _layouts(feeds):
    return [_layout_change(i, kind) for i, feed in enumerate(feeds) for kind in ("non-contiguous", "expanded")
            if feed.dim() and feed.numel() and (kind == "non-contiguous" or feed.shape[0] > 1)]


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=10, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_an_outcome_does_not_depend_on_the_calls_before_it(name, data):
    """Good and hostile values in any order on one plan, with warm-up calls or none: each call's outcome is
    what a fresh plan gives for its feeds (the first call of a signature checks every node, later ones run
    its program; a refusal must neither leak into later calls nor be skipped by them)."""
    case = CASES[name]
    graph, feeds = _case_graph(case)
    menu = [_seed_feeds(feeds), *case.bad, *_layouts(feeds)]
    warm_up = data.draw(st.integers(0, 2), label="warm-up calls")
    length = data.draw(st.integers(1, 4), label="calls")
    sequence = [menu[0]] * warm_up
    for _ in range(length):
        pick = data.draw(st.integers(0, len(menu)), label="change")
        sequence.append(menu[pick] if pick < len(menu) else _hostile_changes(feeds, data))
    plan = _plan(graph)
    for position, change in enumerate(sequence):
        got, fresh = outcome(plan, change(feeds)), outcome(_plan(graph), change(feeds))
        assert got == fresh, (f"{name}: call {position} [{change.label}] after {[c.label for c in sequence[:position]]}"
                              f" differs from a fresh plan's: {got[:2]} vs {fresh[:2]}")


def test_the_property_catches_a_check_made_once_per_signature():
    """The comparison above would have caught the removed fast calls: a kernel that checks values on a
    signature's first call only (here on purpose) lets a hostile value through on a later call."""
    from op_plugin._simulator.interpreter.prepared import prepared_kernel
    from op_plugin._simulator.interpreter.registry import refuse, register_ge_kernel

    def prepare(x):
        checked = []

        def call(x):
            if not checked:
                if bool(torch.isnan(x).any()):
                    refuse("NaN")
                checked.append(True)
            return x * 2

        return call

    handle = register_ge_kernel("TestCheckedOnce", prepared_kernel(prepare))
    try:
        graph, feeds = build_node_graph("TestCheckedOnce", [_r(3)], [(F32, [3])], name="value_node")
        bad = _fill(0, NAN, 1)
        plan = _plan(graph)
        assert outcome(plan, [f.clone() for f in feeds])[0] == "ok"
        assert outcome(plan, bad(feeds)) != outcome(_plan(graph), bad(feeds))
    finally:
        handle.destroy()


# ---- through npugraph: TorchAir's graphs and the per-signature program ---------------------------------------

def _compiled_outcome(fn, *args):
    try:
        out = fn(*[a.clone() for a in args])
    except Exception as error:
        text = str(error)
        return "error", re.sub(r"\s+", " ", text[text.find("node "):][:200] if "node " in text else text[:200])
    return "ok", _bits(out)


NPUGRAPH_CASES = {
    "fp8-cast": (lambda x: (x * 2).to(torch.float8_e4m3fn), lambda: (torch.ones(4, 3),),
                 lambda: (torch.full((4, 3), 1000.0),)),
    "index-range": (lambda x, i: torch.index_select(x, 0, i) + 1, lambda: (torch.randn(5, 3), torch.arange(20) % 5),
                    lambda: (torch.randn(5, 3), torch.arange(20) % 5 + 1)),
}


@pytest.mark.parametrize("warm_up", [0, 2], ids=["cold", "warm"])
@pytest.mark.parametrize("name", sorted(NPUGRAPH_CASES))
def test_hostile_values_through_npugraph_in_any_order(name, warm_up, monkeypatch, recorded_plans):
    """A lowered graph's plan runs its program from a signature's second call: good and bad values (same
    signature) in an order covering every transition, first call bad or good, each call's outcome equal to
    that of a fresh compile's first call on the same values."""
    monkeypatch.delenv("OP_PLUGIN_CHECK_EVERY_CALL", raising=False)
    fn, good, bad = NPUGRAPH_CASES[name]
    torch.manual_seed(0)
    values = {"good": good(), "bad": bad()}
    fresh = {}
    for kind, args in values.items():
        torch._dynamo.reset()
        fresh[kind] = _compiled_outcome(torch.compile(lambda *a: fn(*a), backend="npugraph", fullgraph=True), *args)
    assert fresh["good"][0] == "ok" and fresh["bad"][0] == "error", fresh
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: fn(*a), backend="npugraph", fullgraph=True)
    order = ["good"] * warm_up + ["bad", "good", "good", "bad", "bad", "good"]
    for position, kind in enumerate(order):
        assert _compiled_outcome(compiled, *values[kind]) == fresh[kind], f"{name}: call {position} ({kind}) of {order}"
    assert any(plan._program is not None for plan in recorded_plans)  # the program ran


# ---- fuzzing the per-signature state against eager -----------------------------------------------------------

def _index_rows(x, i):
    return torch.index_select(x, 0, i.reshape(-1, 1).reshape(-1)) * 2   # a folded Reshape of a small integer input


def _embedding_rows(x, i):
    return torch.nn.functional.embedding(i.view(1, -1), x).sum(0) + x[0]


def _pointwise(x, y):
    return torch.where(x > 0, x * y, y - x).sum(-1) + x.amax(-1)


FUZZED = {"index-rows": (_index_rows, "index"), "embedding-rows": (_embedding_rows, "index"),
          "pointwise": (_pointwise, "pair")}
_compiled_fuzz: dict = {}


def _layout(tensor, kind):
    """The same values in another layout: transposed storage, or every other column of a wider tensor."""
    if kind == "transposed":
        return tensor.t().contiguous().t()
    if kind == "strided":
        wide = torch.zeros(tensor.shape[0], tensor.shape[1] * 2, dtype=tensor.dtype)
        wide[:, ::2] = tensor
        return wide[:, ::2]
    return tensor


@st.composite
def _call(draw, kind):
    rows = draw(st.sampled_from([3, 5]), label="rows")
    cols = draw(st.sampled_from([2, 4]), label="cols")
    dtype = draw(st.sampled_from([F32, F16]), label="dtype")
    layout = draw(st.sampled_from(["contiguous", "transposed", "strided"]), label="layout")
    values = torch.randn(rows, cols, generator=torch.Generator().manual_seed(draw(st.integers(0, 99), label="seed")))
    hostile = draw(st.sampled_from([None, NAN, INF, -INF, 1e4]), label="hostile")
    if hostile is not None:
        values[draw(st.integers(0, rows - 1), label="row"), 0] = hostile
    x = _layout(values.to(dtype), layout)
    if kind == "index":
        count = draw(st.integers(1, 4), label="indices")
        rows_picked = draw(st.lists(st.integers(0, rows - 1), min_size=count, max_size=count), label="picked")
        return [x, torch.tensor(rows_picked)]
    if draw(st.booleans(), label="aliased"):
        return [x, x]  # one tensor passed twice
    return [x, _layout(torch.randn(rows, cols).to(dtype), layout)]


_mostly = st.sampled_from([True, True, False])  # repeated signatures and caller writes, two times in three


@settings(max_examples=20, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_call_sequences_against_eager(data, monkeypatch, recorded_plans):
    """Random sequences of calls on compiled functions (static, or dynamic shapes so that several shapes share
    a plan): new and repeated signatures, float32/float16, contiguous, transposed and strided inputs, one tensor passed
    twice, NaN/inf/large values, and between calls the caller writing into the previous call's inputs and
    outputs (a plan must keep nothing of them). Every call equals eager on the same values."""
    monkeypatch.delenv("OP_PLUGIN_CHECK_EVERY_CALL", raising=False)
    name = data.draw(st.sampled_from(sorted(FUZZED)), label="function")
    # static: one plan per shape, whose signatures differ by small integer values (and folded nodes read them)
    dynamic = data.draw(st.booleans(), label="dynamic")
    fn, kind = FUZZED[name]
    compiled = _compiled_fuzz.get((name, dynamic))
    if compiled is None:  # a code object of its own per mode: dynamo keeps its compiled code on the code object
        code = fn.__code__.replace(co_name=f"{fn.__name__}_{'dynamic' if dynamic else 'static'}")
        compiled = _compiled_fuzz[name, dynamic] = torch.compile(types.FunctionType(code, fn.__globals__),
                                                                 backend="npugraph", dynamic=dynamic, fullgraph=True)
    previous = None  # the latest call's arguments, as they were before it
    with torch._dynamo.config.patch(recompile_limit=64):
        for position in range(data.draw(st.integers(2, 8), label="calls")):
            if data.draw(_mostly, label="repeat") and previous is not None:
                args = [a.clone() for a in previous]  # the same signature and values again, in new tensors
            else:
                args = data.draw(_call(kind), label=f"call {position}")
            previous = [a.clone() for a in args]
            try:
                want = fn(*[a.clone() for a in args])
            except IndexError:  # drawn values the function refuses eagerly: so must the graph
                with pytest.raises(Exception, match="index|range"):
                    compiled(*args)
                continue
            got = compiled(*args)
            assert got.dtype == want.dtype and got.shape == want.shape, (name, position)
            torch.testing.assert_close(got.float(), want.float(), equal_nan=True, atol=2e-3, rtol=2e-3,
                                       msg=lambda m, at=position: f"{name} call {at}: {m}")
            if data.draw(_mostly, label="caller writes"):
                for tensor in [*args, got]:
                    tensor.add_(1)


@pytest.mark.parametrize("fn", [_index_rows, _embedding_rows], ids=["index_select-reshape", "embedding-view"])
def test_a_caller_writing_an_earlier_calls_index_changes_no_later_call(fn, monkeypatch):
    """A Reshape (or Identity) of a small integer input is folded per signature (its value is part of the
    signature); it returned a view of the first call's tensor, so after the caller wrote into that tensor a
    later call with equal values (the same signature) used the written ones (wrong rows, silently)."""
    monkeypatch.delenv("OP_PLUGIN_CHECK_EVERY_CALL", raising=False)
    compiled = torch.compile(fn, backend="npugraph", dynamic=False, fullgraph=True)
    x = torch.arange(10.0).reshape(5, 2)
    first = torch.tensor([0, 4, 2])
    for _ in range(2):
        torch.testing.assert_close(compiled(x, first), fn(x, first))
    first[0] = 1  # the caller reuses its buffer
    again = torch.tensor([0, 4, 2])
    torch.testing.assert_close(compiled(x, again), fn(x, again))
    assert not hasattr(first, "_op_plugin_const_ints")  # nothing of the plan's is stored on the caller's tensor
