"""Every attribute a built-in GE kernel's prototype declares is read when the kernel runs, or declared
unread with a reason (`@builtin_kernel(..., unread_attrs={...})`): no attribute is ignored silently.

The kernels run on real nodes: TorchAir's declared cases (tests/data/attr_sample_cases.txt, a
subset covering every GE type the declared cases emit) and a few functions of our own for the
kernels no declared case reaches (`EXTRA_SAMPLES`, forward and backward), compiled with npugraph
and run in-process, plus direct calls on hand-built inputs (`HAND_SAMPLES`: kernels TorchAir's
converters never emit, and attrs read only on some paths), every
built-in kernel wrapped (inside this test only) so that its `attrs` dict logs the keys it reads.
A kernel no sample reaches is an xfail naming it, never a silent skip. Reads are unioned over all
samples, so an attr read only on some path (an epsilon read only when `invert` is set) needs a
sample on that path: add one to `HAND_SAMPLES`, or read the attr at the kernel's top.

The bug class this catches: `Log` once ignored `base`, `scale` and `shift`, so compiled log10
returned ln (`test_an_ignored_attr_is_caught` replays that kernel).

Regenerate the sample list after a full declared-cases run (`op-plugin declared-cases --json F`):
    .venv/bin/python tests/simulator/test_kernel_attrs_read.py F
"""
import collections
import contextlib
import json
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from op_plugin._simulator import register_ge_kernel
from op_plugin._simulator.hosting.ir_registry import builtin_prototypes
from op_plugin._simulator.interpreter.kernels import builtin_kernels, lookup_kernel
from op_plugin._simulator.interpreter.registry import builtin_unread_attrs

SAMPLES = Path(__file__).parents[1] / "data" / "attr_sample_cases.txt"
SLOW_CASE_SECONDS = 5.0  # a case slower than this is a sample only when no other case reaches its GE types


class ReadLog(dict):
    """The kernel's attrs, logging every key the kernel looks up (present or not)."""

    def __init__(self, attrs, sink: set):
        super().__init__(attrs)
        self._sink = sink

    def __getitem__(self, key):
        self._sink.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._sink.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        self._sink.add(key)
        return super().__contains__(key)

    def pop(self, key, *default):
        self._sink.add(key)
        return super().pop(key, *default)

    def setdefault(self, key, default=None):
        self._sink.add(key)
        return super().setdefault(key, default)

    def items(self):
        self._sink.update(super().keys())
        return super().items()

    def values(self):
        self._sink.update(super().keys())
        return super().values()

    def __iter__(self):  # overridden so {**attrs} and dict(attrs) go through __getitem__
        return iter(list(super().keys()))

    def copy(self):
        return ReadLog(self, self._sink)


@contextlib.contextmanager
def recording_reads(kernels: dict):
    """Run `kernels` (GE type -> kernel) in place of the active ones; yields type -> keys read.

    Only calls that return count: a kernel that raised (a refused input) may not have reached its
    attribute reads yet.
    """
    reads = collections.defaultdict(set)
    handles = []

    def wrap(op_type, kernel):
        def logged(inputs, attrs, node):
            sink = set()
            outputs = kernel(inputs, ReadLog(attrs, sink), node)
            reads[op_type].update(sink)
            return outputs
        return logged

    try:
        for op_type, kernel in kernels.items():
            handles.append(register_ge_kernel(op_type, wrap(op_type, kernel), replace=True))
        yield reads
    finally:
        for handle in reversed(handles):
            handle.destroy()


def declared_attrs(op_type: str) -> list[str]:
    prototype = builtin_prototypes().get(op_type)
    return [] if prototype is None else [a.name for a in prototype.attrs]


def ignored_attrs(op_type: str, read: set) -> list[str]:
    """Declared attrs the kernel neither read nor declared unread."""
    unread = builtin_unread_attrs(op_type)
    return [a for a in declared_attrs(op_type) if a not in read and a not in unread]


def _r(*shape, grad=True, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


# name -> (fn, inputs builder); a float output is also differentiated, so backward kernels run.
EXTRA_SAMPLES = {
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (8,), w, b), lambda: (_r(3, 8), _r(8), _r(8))),
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1, stride=2), lambda: (_r(2, 3, 7, 7), _r(4, 3, 3, 3))),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=2), lambda: (_r(1, 4, 5, 5), _r(4, 2, 3, 3))),
    "conv3d": (lambda x, w: F.conv3d(x, w, padding=1), lambda: (_r(1, 2, 4, 5, 5), _r(3, 2, 3, 3, 3))),
    "embedding": (lambda i, w: F.embedding(i, w), lambda: (torch.randint(0, 10, (3, 4)), _r(10, 8))),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), lambda: (_r(1, 2, 6, 6),)),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2), lambda: (_r(1, 2, 4, 4, 4),)),
    "nll_loss": (lambda x, t: F.nll_loss(F.log_softmax(x, -1), t), lambda: (_r(4, 5), torch.randint(0, 5, (4,)))),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), lambda: (_r(2, 4, 3, 3), _r(4), _r(4))),
    "batch_norm_train": (lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=True),
                         lambda: (_r(3, 4, 2, 2), torch.zeros(4), torch.ones(4), _r(4), _r(4))),
    "threshold_half": (lambda x: F.threshold(x, 0.1, 0.0), lambda: (_r(3, 4, dtype=torch.float16),)),
    "nan_to_num": (lambda x: torch.nan_to_num(x, 0.0, 1.0, -1.0), lambda: (_r(3, 4, grad=False),)),
    "silu": (lambda x: F.silu(x), lambda: (_r(3, 4, grad=False),)),
    "topk": (lambda x: torch.topk(x, 2, dim=-1)[0], lambda: (_r(3, 5, grad=False),)),
    "std": (lambda x: torch.std(x, dim=1), lambda: (_r(3, 5, grad=False),)),
    "std_mean": (lambda x: torch.std_mean(x, dim=1, correction=0)[0], lambda: (_r(3, 5, grad=False),)),
    "gather_nd": (lambda x, i, j: x[i, j], lambda: (_r(4, 5, grad=False), torch.tensor([0, 3]), torch.tensor([1, 2]))),
    "gelu": (lambda x: F.gelu(x), lambda: (_r(3, 4),)),
    "split_cat": (lambda x: torch.cat(torch.split(x, [1, 3], 1)[::-1], 1), lambda: (_r(2, 4),)),
    "gather": (lambda x, i: torch.gather(x, 1, i), lambda: (_r(3, 4), torch.randint(0, 4, (3, 2)))),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, 2), lambda: (_r(1, 2, 4, 4),)),
    "relu_half": (lambda x: F.relu(x), lambda: (_r(3, 4, dtype=torch.float16),)),
    "embedding_bag": (lambda i, o, w: F.embedding_bag(i, w, o, mode="sum"),
                      lambda: (torch.tensor([1, 2, 4, 5]), torch.tensor([0, 2]), _r(10, 3))),
    "add_rms_norm": (lambda a, b, g: torch.ops.npu.npu_add_rms_norm(a, b, g, 1e-5)[0],
                     lambda: (_r(2, 8, grad=False), _r(2, 8, grad=False), _r(8, grad=False))),
    "histc": (lambda x: torch.histc(x, bins=4, min=-1, max=1), lambda: (_r(10, grad=False),)),
    "grouped_mm": (lambda x, w, o: F.grouped_mm(x, w, offs=o),
                   lambda: (_r(6, 8, dtype=torch.bfloat16, grad=False), _r(2, 8, 8, dtype=torch.bfloat16, grad=False),
                            torch.tensor([2, 6], dtype=torch.int32))),
}


def _run_extra(fn, make):
    torch._dynamo.reset()
    torch.manual_seed(0)
    inputs = make()
    try:
        out = torch.compile(fn, backend="npugraph")(*inputs)
        if out.requires_grad:
            out.float().sum().backward()
    except Exception:
        pass


def _t(*shape):
    return torch.randn(*shape)


def _i(*values):
    return torch.tensor(values, dtype=torch.int64)


# Kernels no compiled sample reaches, called directly on hand-built inputs: (GE type, inputs, attrs).
# Several samples of one type cover attrs read only on some paths (empty axes, for instance).
HAND_SAMPLES = [
    ("AddN", lambda: [_t(2, 3), _t(2, 3)], {"N": 2}),
    ("Adds", lambda: [_t(2, 3)], {"value": 1.5}),
    ("Axpy", lambda: [_t(2, 3), _t(2, 3)], {"alpha": 2.0}),
    ("Concat", lambda: [_i(1), _t(2, 3), _t(2, 1)], {"N": 2}),
    ("ConcatD", lambda: [_t(2, 3), _t(2, 1)], {"concat_dim": 1, "N": 2}),
    ("ConcatV2D", lambda: [_t(2, 3), _t(2, 1)], {"concat_dim": 1, "N": 2}),
    ("Split", lambda: [_i(1), _t(2, 4)], {"num_split": 2}),
    ("SplitD", lambda: [_t(2, 4)], {"split_dim": 1, "num_split": 2}),
    ("Flatten", lambda: [_t(2, 3, 4)], {"axis": 1}),
    ("FlattenV2", lambda: [_t(2, 3, 4)], {"axis": 1, "end_axis": -1}),
    ("GatherV2D", lambda: [_t(4, 3), _i(0, 2)], {"axis": 0}),
    ("OneHot", lambda: [_i(0, 2), torch.tensor([3], dtype=torch.int32), torch.tensor(1.0), torch.tensor(0.0)],
     {"axis": -1}),
    ("Permute", lambda: [_t(2, 3, 4)], {"order": [2, 0, 1]}),
    ("TransposeD", lambda: [_t(2, 3)], {"perm": [1, 0]}),
    *[(t, lambda: [_t(2, 3)], {"axes": [1], "keep_dims": True})
      for t in ("ReduceSumD", "ReduceMaxD", "ReduceMinD", "ReduceMeanD", "ReduceProdD")],
    *[(t, lambda: [_t(2, 3)], {"axes": [], "keep_dims": False, "noop_with_empty_axes": True})
      for t in ("ReduceSumD", "ReduceMaxD", "ReduceMinD", "ReduceMeanD", "ReduceProdD")],
    *[(t, lambda: [_t(2, 3) > 0], {"axes": [0], "keep_dims": False}) for t in ("ReduceAllD", "ReduceAnyD")],
    *[(t, lambda: [_t(2, 3), _i(1)], {"keep_dims": True}) for t in ("ReduceMin", "ReduceProd", "ReduceMean")],
    *[(t, lambda: [_t(2, 3), _i()], {"keep_dims": False, "noop_with_empty_axes": False})
      for t in ("ReduceMin", "ReduceProd", "ReduceMean", "ReduceSum", "ReduceMax")],
    ("ReduceMeanWithCast", lambda: [_t(2, 3), _i(1)], {"keep_dims": False, "noop_with_empty_axes": True, "dtype": 0}),
    ("ReduceMeanWithCast", lambda: [_t(2, 3), _i()], {"keep_dims": False, "noop_with_empty_axes": False, "dtype": 0}),
    ("ReduceStdWithMean", lambda: [_t(2, 3), _t(2, 1)],
     {"dim": [1], "unbiased": True, "keepdim": True, "invert": True, "epsilon": 1e-3, "correction": 1}),
    ("ShapeN", lambda: [_t(2, 3), _t(4)], {"dtype": 3}),
    ("Size", lambda: [_t(2, 3)], {"dtype": 3}),
    ("StridedSlice", lambda: [_t(4, 5), _i(0, 1), _i(4, 5), _i(2, 1)],
     {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0}),
    ("Bitcast", lambda: [_t(2, 3)], {"type": 3, "keep_dim": False}),
    ("Bitcast", lambda: [_t(2, 3)], {"type": 6, "keep_dim": True}),  # float32 -> int16: keep_dim matters
    ("FillD", lambda: [torch.tensor(2.0)], {"dims": [2, 3]}),
    ("PreventGradient", lambda: [_t(2, 3)], {"message": ""}),
    ("Assign", lambda: [_t(2, 3), _t(2, 3)], {"validate_shape": True, "use_locking": False}),
    ("BatchMatMulV2", lambda: [_t(2, 3, 4), _t(2, 4, 5)], {"adj_x1": False, "adj_x2": False, "offset_x": 0}),
    *[(t, lambda: [_t(2, 3, 4), _t(4), _t(4)], {"begin_norm_axis": -1, "begin_params_axis": -1, "epsilon": 1e-5})
      for t in ("LayerNorm", "LayerNormV3")],
]


def _run_hand_samples(kernels, ge_ir):
    for op_type, make, attrs in HAND_SAMPLES:
        if op_type in kernels:
            try:
                lookup_kernel(op_type)(make(), dict(attrs), ge_ir.OpDef(name=f"hand_{op_type}", type=op_type))
            except Exception:
                pass


def run_samples(case_ids, kernels, extra=(), ge_ir=None):
    from op_plugin._tools.declared_cases import enumerate_cases, run_compiled

    cases = {c.case_id: c for c in enumerate_cases()}
    with recording_reads(kernels) as reads:
        for case_id in case_ids:
            if case_id in cases:
                run_compiled(cases[case_id])
        for name in extra:
            _run_extra(*EXTRA_SAMPLES[name])
        if ge_ir is not None:
            _run_hand_samples(kernels, ge_ir)
    torch._dynamo.reset()
    return {op_type: set(keys) for op_type, keys in reads.items()}


def sample_case_ids() -> list[str]:
    lines = SAMPLES.read_text(encoding="utf-8").splitlines()
    return [line.split()[0] for line in lines if line.strip() and not line.startswith("#")]


KERNELS_WITH_ATTRS = sorted(t for t in builtin_kernels() if declared_attrs(t))


@pytest.fixture(scope="module")
def reads(torchair, ge_ir):
    return run_samples(sample_case_ids(), builtin_kernels(), extra=sorted(EXTRA_SAMPLES), ge_ir=ge_ir)


# Found by this test and reported; each must be fixed in its kernel module (strict: an XPASS fails,
# so a fixed kernel's line has to go).
KNOWN_IGNORED = {
    "MatMulV2": "offset_x (the int8 quantisation offset) is neither read nor refused",
    "BatchMatMulV2": "offset_x (the int8 quantisation offset) is neither read nor refused",
}


@pytest.mark.parametrize("op_type", [pytest.param(t, marks=pytest.mark.xfail(reason=KNOWN_IGNORED[t], strict=True))
                                     if t in KNOWN_IGNORED else t for t in KERNELS_WITH_ATTRS])
def test_every_declared_attr_is_read_or_declared_unread(reads, op_type):
    if op_type not in reads:
        pytest.xfail(f"no sample runs GE kernel {op_type} to completion (see test_kernels_without_a_sample)")
    ignored = ignored_attrs(op_type, reads[op_type])
    assert not ignored, (f"GE kernel {op_type} never read the prototype attrs {ignored}: read them, refuse "
                         "unsupported values with fail(node, ...), or declare them in "
                         "@builtin_kernel(..., unread_attrs={name: why}) when they cannot change the result")


def test_kernels_without_a_sample(reads):
    missing = [t for t in KERNELS_WITH_ATTRS if t not in reads]
    if missing:
        pytest.xfail(f"{len(missing)} of {len(KERNELS_WITH_ATTRS)} built-in kernels with attrs have no sample that "
                     f"runs them to completion yet: {', '.join(missing)}")


@pytest.mark.parametrize("op_type", sorted(builtin_kernels()))
def test_unread_attrs_are_prototype_attrs(op_type):
    unread = builtin_unread_attrs(op_type)
    declared = declared_attrs(op_type)
    assert all(name in declared for name in unread), (op_type, sorted(unread), declared)
    assert all(why.strip() for why in unread.values()), f"{op_type}: every unread attr needs its reason"


def _log_before_the_fix(inputs, attrs, node):
    return [torch.log(inputs[0])]  # the old Log kernel: base, scale and shift ignored


def test_an_ignored_attr_is_caught(torchair):
    reads = run_samples(["aten.log10.default#1"], {"Log": _log_before_the_fix})
    assert ignored_attrs("Log", reads["Log"]) == ["base", "scale", "shift"]
    reads = run_samples(["aten.log10.default#1"], {"Log": builtin_kernels()["Log"]})
    assert ignored_attrs("Log", reads["Log"]) == []


def test_sample_cases_are_declared_cases(torchair):
    from op_plugin._tools.declared_cases import enumerate_cases

    declared = {c.case_id for c in enumerate_cases()}
    stale = [case_id for case_id in sample_case_ids() if case_id not in declared]
    assert not stale, f"{SAMPLES.name} names cases TorchAir does not declare (regenerate it): {stale}"


def test_the_read_log_sees_every_lookup():
    sink = set()
    attrs = ReadLog({"a": 1, "b": 2, "c": 3}, sink)
    attrs.get("a"), attrs["b"], "z" in attrs
    assert sink == {"a", "b", "z"}
    merged = {**attrs}
    assert merged == {"a": 1, "b": 2, "c": 3} and sink == {"a", "b", "c", "z"}


def cover(results: list[dict]) -> list[tuple[str, list[str]]]:
    """A small set of cases reaching every GE type the declared cases emit: passing cases first (every
    kernel of their graph runs), then failing ones for the types only they reach; cheap cases first."""
    chosen, done = [], set()
    for usable in ([r for r in results if r["cls"] == "pass"],
                   [r for r in results if r["cls"] not in ("pass", "crash", "timeout")]):
        usable = [r for r in usable if r.get("ge_types")]
        todo = set().union(*(r["ge_types"] for r in usable)) - done
        while todo:
            def value(r, todo=todo):
                new = len(todo & set(r["ge_types"]))
                return (new > 0, r["seconds"] <= SLOW_CASE_SECONDS, new / (r["seconds"] + 0.2))
            best = max(usable, key=value)
            new = sorted(todo & set(best["ge_types"]))
            chosen.append((best["case_id"], new))
            todo -= set(new)
            done |= set(new)
    return sorted(chosen)


if __name__ == "__main__":
    data = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    picked = cover(data["cases"] if isinstance(data, dict) else data)
    SAMPLES.write_text("# Declared cases run by tests/simulator/test_kernel_attrs_read.py: <case id> <GE types it "
                       "is the sample for>.\n# Regenerate: see that test's docstring.\n"
                       + "".join(f"{case_id} {' '.join(types)}\n" for case_id, types in picked), encoding="utf-8")
    print(f"wrote {SAMPLES}: {len(picked)} cases")
