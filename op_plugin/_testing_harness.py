"""The simulator's test harness: one GE node run through the executor, a function compiled with
npugraph against eager, and the one table of tolerances both compare with.

    from op_plugin._testing_harness import Const, assert_close, check_compiled, run_node

    (y,) = run_node("Flatten", [x], [(torch.float32, [2, 12])], axis=1)
    run = check_compiled(lambda x: torch.flip(x, [0]), (x,), "ReverseV2", kind="kernel")

Private: the project's tests use it (a test module never imports another module of tests/);
`op_plugin.testing` is what users' own suites get.

* `run_node` builds the node as TorchAir lays it out (input descs named after the op's REG_OP
  prototype, a dynamic input's as `x0, x1, ...`, an unfed optional input as "" with a desc,
  attrs encoded as the prototype types them) and runs the graph with `execute_graph`, so the
  binder, the node checks and the graph-output checks all apply.
* `check_compiled` / `Npugraph` compile with the npugraph backend (TorchAir's converters, then
  the GE executor), run eager as the oracle, assert the expected GE types are in the graphs and
  compare every output leaf: same shape, same dtype, values within `tolerance(kind, dtype)`.
* `TOLERANCES` is the one table; its "eager" row is the project's rule
  (`op_plugin._tools._shared.tolerances`, the tolerances `op-plugin test` and `op-plugin compare` use),
  every other row says why a comparison allows what it allows.

Why this module is over 400 lines: node graphs, compiled runs and tolerances are one harness that tests
import as a unit; splitting it would make every test module import three private modules instead of one.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch._dynamo  # reset() below may run before any torch.compile has imported it

from ._ge.builtin_prototypes import builtin_prototype
from ._ge.ir import AttrType, InputKind, OutputKind, IrPrototype
from ._ge.values import TORCH_TO_GE, TORCH_TO_PROTO
from ._tools.user_tests.counting_backend import CountingNpugraph
from ._tools._shared.tolerances import tolerances as project_tolerances

F16, F32, BF16, F64 = torch.float16, torch.float32, torch.bfloat16, torch.float64
C64, C128 = torch.complex64, torch.complex128
DTYPE_IDS = {F32: "fp32", F16: "fp16", BF16: "bf16", F64: "fp64"}

# ---- tolerances ---------------------------------------------------------------------------------------

# kind -> {dtype: (rtol, atol)}. A dtype a row does not list gets the project's rule
# (op_plugin._tools._shared.tolerances: float32 rtol 1.3e-6 / atol 1e-5, float16 1e-3, bfloat16 1.6e-2,
# float64 1e-7, integers and bools exact).
TOLERANCES: dict[str, dict[torch.dtype, tuple[float, float]]] = {
    # The project's rule itself: a compiled or simulated result against eager.
    "eager": {},
    # A GE kernel through TorchAir's converters, or hand-built, against torch eager: the kernels round
    # once where eager CPU may round twice, so 16-bit floats get one unit in the last place more.
    "kernel": {F32: (1e-5, 1e-6), F16: (2e-3, 1e-3), BF16: (1.6e-2, 1e-2)},
    # TorchAir's own check of its converters' declared cases, allclose(rtol=1e-3, atol=1e-5), with
    # the kernel row's 16-bit allowance: element-wise ops that TorchAir decomposes (log1p as Log with
    # a shift, hardswish from Relu6...) round at other points than eager's fused CPU kernels.
    "torchair": {F32: (1e-3, 1e-5), F64: (1e-3, 1e-5), C64: (1e-3, 1e-5), C128: (1e-3, 1e-5),
                 F16: (2e-3, 1e-3), BF16: (1.6e-2, 1e-2)},
    # Reductions (norms, variances, log-sum-exp, losses): the sum runs in another order than eager's.
    "reduction": {F32: (1e-4, 1e-5), F16: (2e-3, 2e-3), BF16: (1.6e-2, 1e-2)},
    # Many products accumulated in another order than eager's (convolutions, sampling, batch-norm
    # gradients, a training step's parameter gradients); float16 convolutions accumulate in float32
    # and round once, as CANN's cube unit does.
    "accumulated": {F32: (1e-4, 1e-4), F16: (4e-3, 4e-3)},
    # Sums over a batch against a formula or eager autograd (sync batch-norm's reductions, a small
    # training step's gradients): another summation order moves values near zero by up to 1e-4.
    "summed": {F32: (1e-5, 1e-4)},
    # Backward kernels against eager computed in float32 and rounded once (what the NPU's kernels
    # do); a case whose gradient sums many terms passes `scale`.
    # The project's rule, bfloat16's atol tighter.
    "grad": {BF16: (1.6e-2, 1e-2)},
    # torch_npu's fused operators (RmsNorm, RotaryMul, SwiGlu, the flash attentions) against torch's
    # formulas: the simulator computes them in float32 in its own order and rounds once.
    "npu_ops": {F32: (2e-5, 2e-5), F16: (2e-3, 2e-3), BF16: (2e-2, 2e-2)},
}


def tolerance(kind: str, dtype: torch.dtype, scale: float = 1.0) -> dict:
    """`dict(rtol=..., atol=...)` for torch.testing.assert_close: row `kind` of TOLERANCES, the
    project's rule for a dtype the row does not list; both multiplied by `scale`."""
    row = TOLERANCES[kind]
    if dtype in row:
        rtol, atol = row[dtype]
    else:
        rule = project_tolerances(dtype)
        rtol, atol = rule["rtol"], rule["atol"]
    return dict(rtol=rtol * scale, atol=atol * scale)


def assert_close(got, want, kind: str = "eager", *, dtype: torch.dtype | None = None, scale: float = 1.0,
                 equal_nan: bool = False, check_dtype: bool = True, what: str = "output") -> None:
    """Every leaf of `got` against the same leaf of `want` (tensors, lists, tuples, dicts): tensors of
    the same shape (and dtype, unless `check_dtype=False`) within `tolerance(kind, dtype or the
    result's dtype, scale)`, compared exactly in float64 (complex128); anything else equal."""
    got_leaves = torch.utils._pytree.tree_leaves(got)
    want_leaves = torch.utils._pytree.tree_leaves(want)
    _require(len(got_leaves) == len(want_leaves), f"{what}: {len(got_leaves)} results, expected {len(want_leaves)}")
    for index, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        where = what if len(got_leaves) == 1 else f"{what} {index}"
        if not isinstance(w, torch.Tensor):
            _require(g == w, f"{where}: {g!r} != {w!r}")
            continue
        _require(isinstance(g, torch.Tensor), f"{where}: got {type(g).__name__}, expected a tensor")
        _require(g.shape == w.shape, f"{where}: shape {list(g.shape)}, expected {list(w.shape)}")
        if check_dtype:
            _require(g.dtype == w.dtype, f"{where}: dtype {g.dtype}, expected {w.dtype}")
        bounds = tolerance(kind, dtype or g.dtype, scale)
        torch.testing.assert_close(_exact(g), _exact(w), **bounds, equal_nan=equal_nan,
                                   msg=lambda message, where=where: f"{where}: {message}")


def _require(condition: bool, message: str) -> None:
    """A failed check (an explicit raise: pytest does not rewrite a package's asserts, -O drops them)."""
    if not condition:
        raise AssertionError(message)


def _exact(tensor: torch.Tensor) -> torch.Tensor:
    """The values in a dtype that holds them exactly, so |got - want| <= atol + rtol * |want| is
    decided without rounding (a 16-bit subtraction would round it)."""
    if tensor.is_complex():
        return tensor.to(C128)
    if tensor.is_floating_point():
        return tensor.to(F64)
    return tensor


# ---- GE graphs by hand ------------------------------------------------------------------------------

def ge_ir():
    """TorchAir's `ge_ir_pb2` (GraphDef, OpDef...), from the simulator's unpacked wheel."""
    from ._simulator import load_simulated_torchair

    load_simulated_torchair()
    from torchair._ge_concrete_graph import ge_ir_pb2

    return ge_ir_pb2


class GraphBuilder:
    """Builds small GE GraphDefs by hand, the way TorchAir lays them out (Data, Const, nodes with
    `x{i}` input descs and python-typed attrs, NetOutput). `run_node` builds on it."""

    PROTO = TORCH_TO_PROTO  # TensorDescriptor.dtype numbers (protobuf enum)

    def __init__(self, ir=None, name: str = "hand_built"):
        self.graph = (ir or ge_ir()).GraphDef(name=name)
        self._inputs = 0

    def _desc(self, desc, dtype, shape, meta=True, layout="ND"):
        desc.dtype = self.PROTO[dtype] if dtype is not None else 0
        desc.layout = layout
        if shape is not None:
            desc.shape.dim.extend(list(shape))
            desc.shape.SetInParent()
        if meta and dtype is not None:  # TorchAir marks descs whose dtype comes from an FX meta
            desc.attr["_meta"].s = b"Tensor(...)"

    def data(self, name, dtype, shape, layout="ND"):
        op = self.graph.op.add(name=name, type="Data")
        op.attr["index"].i = self._inputs
        self._inputs += 1
        self._desc(op.input_desc.add(name="x"), dtype, shape, layout=layout)
        self._desc(op.output_desc.add(name="y"), dtype, shape, layout=layout)
        return f"{name}:0"

    def const(self, name, tensor):
        op = self.graph.op.add(name=name, type="Const")
        value = op.attr["value"].t
        value.desc.dtype = self.PROTO[tensor.dtype]
        value.desc.shape.dim.extend(tensor.shape)
        value.desc.shape.SetInParent()
        # raw little-endian bytes, as TorchAir writes them
        value.data = tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        op.output_desc.add().CopyFrom(value.desc)
        return f"{name}:0"

    def node(self, name, op_type, inputs, outputs, **attrs):
        """outputs: list of (dtype, shape or None); attrs: python ints/floats/bools/lists of int."""
        op = self.graph.op.add(name=name, type=op_type)
        op.input.extend(inputs)
        for i, _ in enumerate(inputs):
            op.input_desc.add(name=f"x{i}")
        for i, (dtype, shape) in enumerate(outputs):
            self._desc(op.output_desc.add(name=f"y{i}"), dtype, shape)
        for key, value in attrs.items():
            set_attr(op, key, value)
        return [f"{name}:{i}" for i in range(len(outputs))]

    def output(self, inputs, outputs, ge_dtypes=None):
        op = self.graph.op.add(name="NetOutput", type="NetOutput")
        op.input.extend(inputs)
        for dtype, shape in outputs:
            self._desc(op.input_desc.add(), dtype, shape, meta=False)
        if ge_dtypes is not None:
            self.graph.attr["_output_dtypes"].list.i.extend(ge_dtypes)
        return self.graph


# TorchAir's list val_type numbers (torchair/ge/attr.py, _ListTypeMap)
_LIST_FIELDS = {AttrType.LIST_INT: ("i", 2), AttrType.LIST_FLOAT: ("f", 3), AttrType.LIST_BOOL: ("b", 4),
                AttrType.LIST_STRING: ("s", 0), AttrType.LIST_DATA_TYPE: ("dt", 10)}


def _dtype_number(value) -> int:
    return TORCH_TO_GE[value] if isinstance(value, torch.dtype) else int(value)


def _python_attr_type(value) -> AttrType:
    if isinstance(value, torch.dtype):
        return AttrType.DATA_TYPE
    if isinstance(value, bool):
        return AttrType.BOOL
    if isinstance(value, int):
        return AttrType.INT
    if isinstance(value, float):
        return AttrType.FLOAT
    if isinstance(value, str):
        return AttrType.STRING
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, (list, tuple)) for v in value):
            return AttrType.LIST_LIST_FLOAT if any(isinstance(x, float) for v in value for x in v) \
                else AttrType.LIST_LIST_INT
        kinds = {_python_attr_type(v) for v in value}
        if kinds == {AttrType.FLOAT, AttrType.INT}:
            return AttrType.LIST_FLOAT
        (kind,) = kinds or {AttrType.INT}
        return {AttrType.BOOL: AttrType.LIST_BOOL, AttrType.INT: AttrType.LIST_INT, AttrType.FLOAT: AttrType.LIST_FLOAT,
                AttrType.STRING: AttrType.LIST_STRING, AttrType.DATA_TYPE: AttrType.LIST_DATA_TYPE}[kind]
    raise TypeError(f"no GE attr type for {value!r}")


def set_attr(op, name: str, value, attr_type: AttrType | str | None = None) -> None:
    """Write `value` into `op.attr[name]` as TorchAir's `ge.attr` builders do; `attr_type` (the
    prototype's VT_* type) decides the field, else the Python type does. A torch.dtype in a
    dtype attr is written as its GE enum number."""
    kind = AttrType(attr_type) if attr_type is not None else _python_attr_type(value)
    attr = op.attr[name]
    if kind is AttrType.INT:
        attr.i = _dtype_number(value) if isinstance(value, torch.dtype) else int(value)
    elif kind is AttrType.FLOAT:
        attr.f = float(value)
    elif kind is AttrType.BOOL:
        attr.b = bool(value)
    elif kind is AttrType.STRING:
        attr.s = value if isinstance(value, bytes) else str(value).encode()
    elif kind is AttrType.DATA_TYPE:
        attr.dt = _dtype_number(value)
    elif kind in _LIST_FIELDS:
        field_name, val_type = _LIST_FIELDS[kind]
        convert = {"i": int, "f": float, "b": bool, "dt": _dtype_number,
                   "s": lambda v: v if isinstance(v, bytes) else str(v).encode()}[field_name]
        getattr(attr.list, field_name).extend([convert(v) for v in value])
        attr.list.val_type = val_type
    elif kind is AttrType.LIST_LIST_INT:
        rows = attr.list_list_int
        rows.SetInParent()
        for row in value:
            rows.list_list_i.add().list_i.extend([int(v) for v in row])
    elif kind is AttrType.LIST_LIST_FLOAT:
        rows = attr.list_list_float
        rows.SetInParent()
        for row in value:
            rows.list_list_f.add().list_f.extend([float(v) for v in row])
    else:  # pragma: no cover - AttrType has no other member
        raise TypeError(f"attr {name}: unsupported type {kind}")


# ---- one node through the executor --------------------------------------------------------------------

@dataclass(frozen=True)
class Const:
    """A node input fed by a Const node (its value known when the plan is built) instead of a Data."""

    value: torch.Tensor


def node_prototype(op_type: str) -> IrPrototype | None:
    """The prototype the executor binds `op_type`'s kernel with: the kernel's own declaration,
    else CANN's REG_OP (None when neither exists)."""
    from ._simulator.interpreter.binding import prototype_of
    from ._simulator.interpreter.kernels import lookup_kernel

    entry = lookup_kernel(op_type)
    if entry is not None:
        return prototype_of(entry, op_type)
    try:
        return builtin_prototype(op_type)
    except OSError:
        return None


def _slots(op_type: str, prototype: IrPrototype | None, inputs) -> list[tuple[str, Any]]:
    """(desc name, value) per node input in GE order; value None is an unfed optional input."""
    if prototype is None:
        if isinstance(inputs, Mapping):
            return list(inputs.items())
        return [(f"x{i}", value) for i, value in enumerate(inputs)]
    params = list(prototype.inputs)
    if isinstance(inputs, Mapping):
        unknown = set(inputs) - {p.name for p in params}
        if unknown:
            raise TypeError(f"{op_type}: no input {sorted(unknown)} in the prototype {[p.name for p in params]}")
        given = [inputs.get(p.name) for p in params]
    else:
        if len(inputs) > len(params):
            raise TypeError(f"{op_type}: {len(inputs)} inputs given, the prototype declares {[p.name for p in params]}")
        given = list(inputs) + [None] * (len(params) - len(inputs))
    slots = []
    for param, value in zip(params, given, strict=True):
        if value is None and param.kind is InputKind.REQUIRED:
            raise TypeError(f"{op_type}: required input {param.name!r} not given (TorchAir always feeds it)")
        if param.kind is InputKind.DYNAMIC:
            if not isinstance(value, (list, tuple)):
                raise TypeError(f"{op_type}: input {param.name!r} is dynamic; give its tensors as a list")
            slots.extend((f"{param.name}{i}", v) for i, v in enumerate(value))
        elif isinstance(value, (list, tuple)):
            raise TypeError(f"{op_type}: input {param.name!r} is not dynamic; a list was given")
        else:
            slots.append((param.name, value))
    return slots


def _output_specs(op_type: str, prototype: IrPrototype | None, outputs) -> list[tuple[str, Any, Any]]:
    """(desc name, dtype or None, shape or None) per node output."""
    params = list(prototype.outputs) if prototype is not None else []
    if outputs is None:
        if any(p.kind is OutputKind.DYNAMIC for p in params) or not params:
            raise TypeError(f"{op_type}: give `outputs` (a count or (dtype, shape) pairs): the prototype does not "
                            "fix how many there are")
        outputs = len(params)
    if isinstance(outputs, int):
        outputs = [(None, None)] * outputs
    outputs = [(dtype, None if shape is None else [int(d) for d in shape]) for dtype, shape in outputs]
    dynamic = [p for p in params if p.kind is OutputKind.DYNAMIC]
    if params and not dynamic and len(params) == len(outputs):
        names = [p.name for p in params]
    elif len(dynamic) == 1 and len(params) == 1:
        names = [f"{params[0].name}{i}" for i in range(len(outputs))]
    else:
        names = [f"y{i}" for i in range(len(outputs))]
    return [(name, dtype, shape) for name, (dtype, shape) in zip(names, outputs, strict=True)]


def build_node_graph(op_type: str, inputs, outputs=None, /, *, layouts=None, name: str = "op", **attrs):
    """The GraphDef `run_node` runs, and the tensors to feed its Data nodes."""
    prototype = node_prototype(op_type)
    slots = _slots(op_type, prototype, inputs)
    layout_of = _layouts(slots, layouts)
    builder = GraphBuilder()
    refs, feeds, descs = [], [], []
    for index, (desc_name, value) in enumerate(slots):
        if value is None:
            refs.append("")
            descs.append(None)
            continue
        if isinstance(value, Const):
            refs.append(builder.const(f"{desc_name}_const", value.value))
            source = builder.graph.op[-1].output_desc[0]
        elif isinstance(value, torch.Tensor):
            refs.append(builder.data(f"data_{desc_name}", value.dtype, list(value.shape),
                                     layout=layout_of.get(index, "ND")))
            feeds.append(value)
            source = builder.graph.op[-1].output_desc[0]
        else:
            raise TypeError(f"{op_type}: input {desc_name!r} is {type(value).__name__}; give a tensor, Const or None")
        descs.append(source)
    op = builder.graph.op.add(name=name, type=op_type)
    op.input.extend(refs)
    for index, ((desc_name, _), source) in enumerate(zip(slots, descs, strict=True)):
        desc = op.input_desc.add()
        if source is None:  # TorchAir's get_invalid_desc(): DT_UNDEFINED, marked unfed
            desc.attr["_is_unfed_optional"].i = 1
        else:
            desc.CopyFrom(source)
            desc.layout = layout_of.get(index, source.layout or "ND")
        desc.name = desc_name
    specs = _output_specs(op_type, prototype, outputs)
    for desc_name, dtype, shape in specs:
        builder._desc(op.output_desc.add(name=desc_name), dtype, shape)
    attr_types = prototype.attr_types() if prototype is not None else {}
    for key, value in attrs.items():
        set_attr(op, key, value, attr_types.get(key))
    declared = [(dtype, shape) for _, dtype, shape in specs]
    ge_dtypes = [TORCH_TO_GE[dtype] for dtype, _ in declared] if all(d is not None for d, _ in declared) else None
    graph = builder.output([f"{name}:{i}" for i in range(len(specs))], declared, ge_dtypes=ge_dtypes)
    return graph, feeds


def _layouts(slots, layouts) -> dict[int, str]:
    """Node input index -> layout, from a {desc name: layout} mapping or a list in input order."""
    if not layouts:
        return {}
    if isinstance(layouts, Mapping):
        positions = {desc_name: index for index, (desc_name, _) in enumerate(slots)}
        unknown = set(layouts) - set(positions)
        if unknown:
            raise TypeError(f"layouts for inputs {sorted(unknown)}, which the node does not have")
        return {positions[desc_name]: layout for desc_name, layout in layouts.items()}
    return dict(enumerate(layouts))


def run_node(op_type: str, inputs, outputs=None, /, *, layouts=None, name: str = "op", **attrs) -> list:
    """Run one GE node of `op_type` through the executor; returns its outputs.

    inputs: in the prototype's order, a list (trailing optional inputs may be left off) or a
    {prototype input name: value} mapping; each value a tensor (fed by a Data node), `Const(tensor)`,
    None (an optional input left unfed) or, for a dynamic input, a list of those.
    outputs: (dtype, shape) pairs the node and the graph declare (None in a pair: not declared;
    a shape may hold -1), a count of undeclared outputs, or None for one undeclared output per
    prototype output.
    layouts: input layouts (NCHW, NHWC, HWCN...), a list in input order or {desc name: layout}.
    attrs: the node's attrs, encoded as the prototype types them (a torch.dtype in a dtype attr is
    its GE number); attrs left off get CANN's defaults through the binder (TorchAir writes them all).
    The node is named `name` (errors say "node 'op'").
    """
    from ._simulator import execute_graph

    graph, feeds = build_node_graph(op_type, inputs, outputs, layouts=layouts, name=name, **attrs)
    return execute_graph(graph, feeds)


def program_plan(graph):
    """A plan of a hand-built `graph` whose repeated input signatures run the generated program (its first call of
    a signature checks every node), as a lowered graph's do: no FX shapes to check against."""
    import collections

    from ._simulator.interpreter.executor import plan as plan_module

    plan = plan_module.compile_graph(graph)
    plan.fx = plan_module.FxShapes.__new__(plan_module.FxShapes)
    plan.fx.bindings, plan.fx._cache = [], {}
    plan._verified = collections.OrderedDict()
    return plan


# ---- compiled against eager ---------------------------------------------------------------------------

def _copies(args):
    return torch.utils._pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone(), args)


def _in_float32(args):
    return torch.utils._pytree.tree_map_only(torch.Tensor, lambda t: t.float() if t.dtype in (F16, BF16) else t, args)


@dataclass
class CompiledRun:
    """What one `Npugraph.check` saw: the compiled outputs, eager's, the arguments the compiled call
    ran on (copies: in-place updates show there) and the GE graphs built during the call."""

    got: Any
    want: Any
    args: tuple
    graphs: list = field(default_factory=list)

    @property
    def ge_types(self) -> list[str]:
        """GE op types of every graph built during the call, in order."""
        return [op.type for graph in self.graphs for op in graph.op]

    @property
    def types_per_graph(self) -> list[list[str]]:
        return [[op.type for op in graph.op] for graph in self.graphs]


class Npugraph:
    """`fn` compiled once with the npugraph backend (`options`: npugraph_backend's keyword options),
    counting its compiles; `check` runs it against eager."""

    def __init__(self, fn: Callable, *, dynamic: bool = False, fullgraph: bool = True, options: dict | None = None):
        torch._dynamo.reset()
        self.fn = fn
        self.backend = CountingNpugraph(**(options or {}))
        self.compiled = torch.compile(fn, backend=self.backend, dynamic=dynamic, fullgraph=fullgraph)

    @property
    def compiles(self) -> int:
        return self.backend.compiles

    def __call__(self, *args, **kwargs):
        return self.compiled(*args, **kwargs)

    def check(self, args: Sequence, ge_types: str | Iterable[str] | None = None, *, kwargs: dict | None = None,
              oracle: Callable | None = None, oracle_in_float32: bool = False, kind: str = "eager",
              scale: float = 1.0, equal_nan: bool = True, no_grad: bool = False,
              mutated: Iterable[int] = ()) -> CompiledRun:
        """Run the compiled function on copies of `args`, then `oracle` (default: the function)
        eagerly on `args`; assert every GE type of `ge_types` is in the graphs built by the call and
        compare the results (`assert_close` with `kind`, `scale`, `equal_nan`). `oracle_in_float32`:
        the oracle gets float32 copies of 16-bit tensors and its results are rounded to each compiled
        result's dtype (what NPU kernels do), so dtypes are not compared. `mutated`: positions of
        arguments both runs update in place, compared too. `no_grad`: both runs under torch.no_grad."""
        from ._simulator import capture_graphs

        kwargs = kwargs or {}
        copies = _copies(tuple(args))
        with torch.no_grad() if no_grad else contextlib.nullcontext(), capture_graphs() as graphs:
            got = self.compiled(*copies, **_copies(kwargs))
        oracle = oracle or self.fn
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            if oracle_in_float32:
                want = oracle(*_in_float32(tuple(args)), **_in_float32(kwargs))
            else:
                want = oracle(*args, **kwargs)
        run = CompiledRun(got, want, copies, list(graphs))
        if ge_types is not None:
            expected = [ge_types] if isinstance(ge_types, str) else list(ge_types)
            missing = [t for t in expected if t not in run.ge_types]
            _require(not missing, f"GE types {missing} not in the graphs: {run.ge_types}")
        if oracle_in_float32:
            got_leaves = torch.utils._pytree.tree_leaves(got)
            want_leaves = torch.utils._pytree.tree_leaves(want)
            _require(len(got_leaves) == len(want_leaves), f"{len(got_leaves)} results, expected {len(want_leaves)}")
            want = [w.to(g.dtype) if isinstance(w, torch.Tensor) and isinstance(g, torch.Tensor) else w
                    for g, w in zip(got_leaves, want_leaves, strict=True)]
            got = got_leaves
        assert_close(got, want, kind, scale=scale, equal_nan=equal_nan, check_dtype=not oracle_in_float32)
        for index in mutated:
            assert_close(copies[index], args[index], kind, scale=scale, equal_nan=equal_nan,
                         what=f"argument {index} (updated in place)")
        return run


def check_compiled(fn: Callable, args: Sequence, ge_types: str | Iterable[str] | None = None, *,
                   dynamic: bool = False, fullgraph: bool = True, options: dict | None = None,
                   **check) -> CompiledRun:
    """`Npugraph(fn, ...).check(args, ge_types, **check)`: compile `fn` with npugraph (dynamo reset
    first) and compare one call with eager; see `Npugraph.check` for the keywords."""
    return Npugraph(fn, dynamic=dynamic, fullgraph=fullgraph, options=options).check(args, ge_types, **check)


def data_dims(graph) -> list[list[int]]:
    """The shapes of a GE graph's Data nodes (-1 marks a symbolic dim)."""
    return [list(op.output_desc[0].shape.dim) for op in graph.op if op.type == "Data"]


def check_dynamic_sizes(fn: Callable, args_per_size: Sequence[Sequence], **check) -> list[CompiledRun]:
    """Compile `fn` once with dynamic=True; every size must match eager (`Npugraph.check` keywords)
    through one GE graph whose Data nodes have a symbolic (-1) dim, built by one compile."""
    compiled = Npugraph(fn, dynamic=True)
    runs = [compiled.check(args, **check) for args in args_per_size]
    first = runs[0].graphs if runs else []
    _require(bool(first) and any(-1 in dims for dims in data_dims(first[0])),
             f"no symbolic (-1) dim in the first graph's Data nodes: {[data_dims(g) for g in first]}")
    _require(compiled.compiles == 1 and sum(len(run.graphs) for run in runs) == 1,
             f"{compiled.compiles} compiles, GE graphs per size {[len(run.graphs) for run in runs]}; expected one")
    return runs


# ---- TorchAir's declared cases ------------------------------------------------------------------------

def _declared_input(spec, typed_tensor):
    """A declared case's input as the kernel tests build it: `value` as given, `value_range` as
    uniform rand, bools random, integers in [-5, 6) ([0, 6) for uint8), floats randn."""
    if isinstance(spec, typed_tensor):
        if spec.value is not None:
            return torch.tensor(spec.value, dtype=spec.dtype)
        if spec.value_range is not None:
            low, high = spec.value_range
            return (torch.rand(spec.dims) * (high - low) + low).to(spec.dtype)
        if spec.dtype == torch.bool:
            return torch.rand(spec.dims) > 0.5
        if spec.dtype.is_complex:
            return torch.randn(spec.dims, dtype=spec.dtype)
        if not spec.dtype.is_floating_point:
            low = 0 if spec.dtype == torch.uint8 else -5
            return torch.randint(low, 6, spec.dims, dtype=spec.dtype)
        return torch.randn(spec.dims).to(spec.dtype)
    if isinstance(spec, (list, tuple)):
        return type(spec)(_declared_input(v, typed_tensor) for v in spec)
    return spec


def torchair_declared_cases(target_name: str) -> list[tuple[Callable, list, dict]]:
    """[(target, args, kwargs)] of TorchAir's declared cases for the converter of `target_name`
    (`aten.x.y`), case n's inputs drawn under torch.manual_seed(n)."""
    from ._simulator import load_simulated_torchair

    load_simulated_torchair()
    from torchair._ge_concrete_graph.fx2ge_converter import _declare_supported_converters
    from torchair._ge_concrete_graph.supported_declaration import _TypedTensor

    for target, converter in _declare_supported_converters().items():
        if str(target) == target_name:
            cases = []
            for index, support in enumerate(converter.supported_cases or []):
                torch.manual_seed(index)
                cases.append((target, _declared_input(support.args, _TypedTensor),
                              {k: _declared_input(v, _TypedTensor) for k, v in support.kwargs.items()}))
            return cases
    raise LookupError(f"TorchAir declares no cases for {target_name}")
