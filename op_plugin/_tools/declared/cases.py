"""TorchAir's declared converter cases, run one by one through npugraph against CPU eager.

TorchAir declares test cases on its converters (`@declare_supported([Support(F32(2, 3), ...)])`,
`fx2ge_converter._declare_supported_converters()`). This module enumerates them, builds each
case's inputs the way TorchAir's converter tests do (a `value` as `torch.tensor(value)`, a
`value_range` as uniform `rand` in that range, otherwise `randn`, each cast to the spec's dtype;
`device="npu"` becomes the CPU),
runs the converter's target compiled with `torch.compile(backend="npugraph")` and eagerly, and
classifies the result (`CLASSES`). One case runs in-process here; `declared_pool` runs many in
guarded worker processes and `declared_report` summarises them.

op_plugin's own converters (`op_plugin/_lowering/registry.py`) declare cases in the same form
(`@aten_converter(..., cases=[Support(F32(2, 3))])`); they run alike, against the converters
installed on the simulator's TorchAir (op_plugin's, where the registry installs them).

A case id is `<target>#<n>`: the converter's target (`aten.add.Tensor`, `operator.neg`) and the
case's position in its declaration, from 1; op_plugin's cases are `<target>#op_plugin-<n>`.

Deliberate differences from TorchAir's own test: each side gets its own copy of the inputs (an
in-place op run compiled first would otherwise feed eager the mutated inputs), tensor arguments
the op mutates are compared too, and the tolerance is per dtype (`declared_compare`). A random op
(tagged `nondeterministic_seeded`) cannot match CPU eager bit for bit: its outputs are compared
by structure, dtype and shape only, and two compiled runs under the same seed must agree.
"""
from __future__ import annotations

import re
import time
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch._dynamo  # reset() below may run before any torch.compile has imported it

from ..._base.paths import shown, special_file
from .compare import compare
from .group import case_group, needs_group, with_group_names
from .result import CaseResult

# Result classes. eager-unsupported cases are not counted: eager itself fails on the CPU. too-large: not
# run at all, its declared inputs alone exceed INPUT_BYTES_LIMIT (it would exhaust the shared host's memory).
CLASSES = ("pass", "numeric", "shape-dtype", "missing-kernel", "kernel-error", "lowering-error",
           "crash", "timeout", "too-large", "eager-unsupported")
FAILING = tuple(c for c in CLASSES if c not in ("pass", "eager-unsupported"))

_MISSING = re.compile(r"GE op type '(\w+)' \(node [^)]*\) has no CPU kernel")
_KERNEL_TYPE = re.compile(r"GE kernel for (\w+) failed|\((\w+)\)")


@dataclass(frozen=True)
class DeclaredCase:
    """One declared case: `target(*args, **kwargs)` with inputs built from `support` specs."""

    case_id: str
    target: Callable
    support: object  # TorchAir's Support (args/kwargs of specs and plain values)

    @property
    def converter(self) -> str:
        return self.case_id.rsplit("#", 1)[0]

    def describe(self) -> str:
        parts = [str(a) for a in self.support.args] + [f"{k}={v}" for k, v in self.support.kwargs.items()]
        return f"{self.converter}({', '.join(parts)})"


# Extra cases registered in a worker by a setup module (the tool's own tests plant cases here).
_planted: dict[str, DeclaredCase] = {}


def plant_case(case_id: str, target: Callable, *args, **kwargs) -> None:
    """Add a case that is not TorchAir's: `target(*args, **kwargs)`; args may be TorchAir specs."""
    _planted[case_id] = DeclaredCase(case_id, target, _Support(args, kwargs))


# The setup modules imported for this run, kept alive: what a setup file defines through a
# torch.library fragment (Library(..., "FRAGMENT")) lives only as long as the fragment object, so a
# throwaway module would lose its ops at the next garbage collection and the run would silently
# enumerate fewer cases.
_setup_modules: dict[str, object] = {}


def import_setup(name: str):
    """Import a setup module (it may `plant_case` or define ops): a module name, or the path of a .py
    file (registered in sys.modules under a name derived from its path). The module is kept for the
    process, so the ops and cases it defines stay; importing the same setup again is a no-op. Returns it."""
    import importlib
    import importlib.util
    import sys

    if name in _setup_modules:
        return _setup_modules[name]
    if not name.endswith(".py"):
        module = importlib.import_module(name)
    else:
        kind = special_file(name)
        if kind is not None:  # a FIFO would block the import, a device never end it
            raise ImportError(f"{shown(name)}: the path is {kind}, not a regular file")
        module_name = f"_declared_setup_{zlib.crc32(name.encode('utf-8', 'surrogateescape'))}"
        spec = importlib.util.spec_from_file_location(module_name, name)
        if spec is None:
            raise ImportError(f"cannot load setup file {name}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # as `import` does: the module (and its fragments) stays alive
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(module_name, None)
            raise
    _setup_modules[name] = module
    return module


@dataclass(frozen=True)
class _Support:
    args: tuple
    kwargs: dict


def target_name(target) -> str:
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(target)
    module = getattr(target, "__module__", None) or "builtins"
    return f"{module.lstrip('_') if module == '_operator' else module}.{getattr(target, '__name__', target)}"


def declared_converters() -> dict:
    """TorchAir's declared converters (target -> Converter), custom-op converters included."""
    from ..._simulator import load_simulated_torchair

    load_simulated_torchair()
    from torchair._ge_concrete_graph.fx2ge_converter import (
        _declare_supported_converters,
    )

    with warnings.catch_warnings():  # TorchAir warns for every torch_npu op the simulator does not define
        warnings.simplefilter("ignore")
        try:
            from torchair._ge_concrete_graph.ge_converter import custom  # noqa: F401  (registers; TorchAir imports it lazily)
        except Exception:  # as TorchAir's test does: custom converters are optional
            pass
    return _declare_supported_converters()


OWN_CASE = "op_plugin-"  # the case number's prefix in the id of op_plugin's own declared cases


def enumerate_cases(prefixes=()) -> list[DeclaredCase]:
    """Every declared case, TorchAir's and op_plugin's (plus planted ones), whose id starts with
    one of `prefixes` (all if none)."""
    from ..._lowering.registry import declared_cases as own_declared_cases

    cases = []
    for target, converter in declared_converters().items():
        name = target_name(target)
        for index, support in enumerate(converter.supported_cases or (), start=1):
            cases.append(DeclaredCase(f"{name}#{index}", target, support))
    for target, index, support in own_declared_cases():
        cases.append(DeclaredCase(f"{target_name(target)}#{OWN_CASE}{index}", target, support))
    cases.extend(_planted.values())
    cases.sort(key=_case_order)
    if prefixes:
        cases = [c for c in cases if any(c.case_id.startswith(p) for p in prefixes)]
    return cases


def _case_order(case: DeclaredCase) -> tuple:
    """By converter, TorchAir's cases before op_plugin's, each by number."""
    number = case.case_id.rsplit("#", 1)[1] if "#" in case.case_id else "0"
    own = number.startswith(OWN_CASE)
    number = number.removeprefix(OWN_CASE)
    return case.converter, own, int(number) if number.isdigit() else 0, case.case_id


def _as_input(spec):
    from torchair._ge_concrete_graph.supported_declaration import _TypedTensor

    from ..._lowering.cases import TypedTensor

    if isinstance(spec, (list, tuple)):
        return [_as_input(v) for v in spec]
    if isinstance(spec, str) and re.fullmatch(r"npu(:\d+)?", spec):
        return "cpu"  # the simulator's NPU is the CPU: device="npu" means the host
    if not isinstance(spec, (_TypedTensor, TypedTensor)):
        return spec
    if spec.value is not None:
        return torch.tensor(spec.value, dtype=spec.dtype)
    if spec.value_range is not None:
        low, high = spec.value_range
        return (torch.rand(*spec.dims) * (high - low) + low).to(spec.dtype)
    return torch.randn(*spec.dims).to(spec.dtype)


# A case builds its inputs several times (compiled copy, eager copy, clones) and computes in float32 beside
# them, so inputs of this size already need several times it; the workers' address-space limit is 8 GiB.
INPUT_BYTES_LIMIT = 2**30


def input_bytes(case: DeclaredCase) -> int:
    """The bytes of the case's declared tensor inputs, from the specs alone (nothing is allocated)."""
    from torchair._ge_concrete_graph.supported_declaration import _TypedTensor

    from ..._lowering.cases import TypedTensor

    def size(spec) -> int:
        if isinstance(spec, (list, tuple)):
            return sum(size(v) for v in spec)
        if not isinstance(spec, (_TypedTensor, TypedTensor)) or spec.value is not None:
            return 0
        dims = spec.dims
        if len(dims) == 1 and isinstance(dims[0], (list, tuple)):  # F32([2, 3]) / I32([]): the shape as one list
            dims = dims[0]
        numel = 1
        for dim in dims:
            numel *= int(dim)
        return numel * torch.empty((), dtype=spec.dtype).element_size()

    return size(list(case.support.args)) + size(list(case.support.kwargs.values()))


def _too_large(case: DeclaredCase) -> CaseResult | None:
    needed = input_bytes(case)
    if needed <= INPUT_BYTES_LIMIT:
        return None
    return CaseResult(case.case_id, "too-large",
                      f"not run: its declared inputs ({case.describe()}) take {needed / 2**30:.1f} GiB, over the "
                      f"tool's bound of {INPUT_BYTES_LIMIT / 2**30:.0f} GiB per case (the run would need several "
                      "times that)")


def build_inputs(case: DeclaredCase) -> tuple[list, dict]:
    """The case's inputs, the same on every run (seeded from the case id)."""
    torch.manual_seed(zlib.crc32(case.case_id.encode()))
    args = [_as_input(a) for a in case.support.args]
    kwargs = {k: _as_input(v) for k, v in case.support.kwargs.items()}
    return with_group_names(case.target, args, kwargs)  # a communicator name: the case's one-rank group


def _clone(tree):
    return torch.utils._pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, tree)


def _call(target, args, kwargs):
    out = target(*args, **kwargs)
    return _clone(out)  # as TorchAir's test: results are copies, never views of the inputs


@dataclass
class CompiledRun:
    """The compiled half of a case: its inputs, the compiled function, and what it returned or raised."""

    args: list
    kwargs: dict
    compiled: Callable
    out: object = None
    error: BaseException | None = None
    graphs: list = field(default_factory=list)  # the GE GraphDefs it loaded

    @property
    def ge_types(self) -> list[str]:
        return sorted({op.type for g in self.graphs for op in g.op} - {"Data", "Const", "NetOutput"})


def run_compiled(case: DeclaredCase) -> CompiledRun:
    """Run the case through `torch.compile(backend="npugraph")` on a copy of its inputs."""
    from ..._simulator import capture_graphs

    torch._dynamo.reset()
    args, kwargs = build_inputs(case)
    run = CompiledRun(args, kwargs, torch.compile(lambda *a, **k: _call(case.target, a, k), backend="npugraph"))
    torch.manual_seed(0)
    with capture_graphs() as graphs:
        try:
            run.out = run.compiled(*run.args, **run.kwargs)
        except Exception as error:  # classified by run_case
            run.error = error
    run.graphs = list(graphs)
    return run


def run_case(case: DeclaredCase) -> CaseResult:
    """Run one case compiled (npugraph) and eagerly on the CPU, and classify the outcome. An op that
    takes a communicator name runs in a gloo world of its `world_size` ranks, else one (`declared_group`)."""
    refused = _too_large(case)
    if refused is not None:
        return refused
    if needs_group(case.target):
        with case_group(case, _run_case) as peers:
            return peers.fold(_run_case(case))
    return _run_case(case)


def _run_case(case: DeclaredCase) -> CaseResult:
    started = time.monotonic()
    run = run_compiled(case)
    args, kwargs = build_inputs(case)  # the inputs again, unmutated
    c_args, c_kwargs, compiled_out, compiled_error, compiled = run.args, run.kwargs, run.out, run.error, run.compiled
    e_args, e_kwargs = _clone(args), _clone(kwargs)
    torch.manual_seed(0)
    try:
        eager_out = _call(case.target, e_args, e_kwargs)
        eager_error = None
    except Exception as error:
        eager_error = error
    result = CaseResult(case.case_id, "pass", ge_graphs=len(run.graphs), ge_types=run.ge_types)
    if eager_error is not None:
        result.cls, result.reason = "eager-unsupported", _one_line(eager_error)
    elif compiled_error is not None:
        _classify_error(result, compiled_error)
    elif _is_random(case.target):
        compare(result, (compiled_out,), (eager_out,), values=False)
        if result.cls == "pass":
            torch.manual_seed(0)
            again = compiled(*_clone(args), **_clone(kwargs))
            compare(result, (again,), (compiled_out,))
            if result.cls != "pass":
                result.reason = "random op: two compiled runs under the same seed differ: " + result.reason
    else:
        compare(result, (compiled_out, c_args, c_kwargs), (eager_out, e_args, e_kwargs))
    torch._dynamo.reset()
    result.seconds = round(time.monotonic() - started, 3)
    return result


def _is_random(target) -> bool:
    return torch.Tag.nondeterministic_seeded in getattr(target, "tags", ())


def _one_line(error: BaseException, limit: int = 400) -> str:
    text = str(error).split("Traceback (most recent call last)", 1)[0]  # TorchAir appends the traceback
    text = " ".join(text.split()) or type(error).__name__
    text = f"{type(error).__name__}: {text}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _error_chain(error: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        chain.append(error)
        error = getattr(error, "inner_exception", None) or error.__cause__ or error.__context__
    return chain


def _classify_error(result: CaseResult, error: BaseException) -> None:
    from ..._simulator import GeExecutionError

    chain = _error_chain(error)
    for link in chain:
        found = _MISSING.search(str(link))
        if found:
            result.cls, result.ge_type = "missing-kernel", found.group(1)
            result.reason = f"no CPU kernel for GE type {found.group(1)}"
            return
    executor_error = next((link for link in chain if isinstance(link, GeExecutionError)), None)
    if isinstance(error, MemoryError) or any(isinstance(link, MemoryError) for link in chain):
        result.cls, result.reason = "crash", "out of memory: " + _one_line(error)
    elif executor_error is not None:
        found = _KERNEL_TYPE.search(str(executor_error))
        result.cls, result.reason = "kernel-error", _one_line(executor_error)
        result.ge_type = next((g for g in found.groups() if g), None) if found else None
    else:  # TorchAir, a converter or dynamo raised before the GE graph ran
        result.cls, result.reason = "lowering-error", _one_line(chain[-1] if len(chain) > 1 else error)
