"""`TorchAirApi`: what op_plugin's own converters use of TorchAir, as one object.

op_plugin's converters (`registry`) receive it as their first argument, `ta`, instead of importing
TorchAir's modules by path. It is built once per installation, on the host's TorchAir module (the
one torch_npu ships on an Ascend host, the simulator's on a CPU host), and imports TorchAir's
modules on first use, i.e. while a graph is lowered: installing imports nothing of TorchAir's (on
an Ascend host `import op_plugin` installs the converters, and TorchAir's graph modules cost
seconds). A converter installed to complete or correct TorchAir's gets a view of it that also
names the op (`ta.op`) and TorchAir's converter it replaces (`ta.original`).

TorchAir's converter registry: TorchAir keeps an op's converter as `op._ge_converter`, a
`functools.wraps` wrapper around the converter function (which therefore is `wrapper.__wrapped__`).
`torchair_converter` reads it; `is_not_implemented_stub` tells a converter that exists from one
that only raises (TorchAir generates `raise NotImplementedError(...)` stubs for most aten ops it does
not lower, and `raise RuntimeError("... ge_converter is not supported!")` for a few: `aten.sort.stable`,
`aten.sub.Scalar`, `aten.randint.low`, ...); `torchair_lowers` combines the two.
"""
from __future__ import annotations

import ast
import copy
import importlib
import inspect
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from . import converter_loading

# The attribute on op_plugin's installed converter naming the converter it replaced (None if none).
REPLACED = "op_plugin_replaced"


def converter_table() -> dict:
    """TorchAir's table of the converters of FX targets that take no attribute (builtins such as
    `operator.add` or `math.trunc`: TorchAir's `Converter` keeps those in `fx2ge_converter.
    _CONVERTERS`), or an empty dict before TorchAir's graph module is imported."""
    for name in ("torchair._ge_concrete_graph.fx2ge_converter",
                 "torch_npu.dynamo.torchair._ge_concrete_graph.fx2ge_converter"):
        module = sys.modules.get(name)
        if module is not None:
            return module._CONVERTERS
    return {}


def registered_wrapper(op: Any) -> Callable | None:
    """TorchAir's registered (wrapped) converter of `op`, where TorchAir keeps it, or None. TorchAir's own
    converters are loaded first when they are deferred and `op` has none yet (converter_loading)."""
    attrs = getattr(op, "__dict__", None)
    if attrs is not None:
        found = attrs.get("_ge_converter")
        if found is None and converter_loading.pending():
            converter_loading.ensure_loaded()
            found = attrs.get("_ge_converter")
        return found
    converter_loading.ensure_loaded()
    return converter_table().get(op)


def torchair_converter(op: Any) -> Callable | None:
    """The converter function registered for `op` now (unwrapped), or None if it has none."""
    wrapper = registered_wrapper(op)
    if wrapper is None:
        return None
    return getattr(wrapper, "__wrapped__", wrapper)


# The exceptions a stub converter raises: TorchAir's generated stubs raise NotImplementedError, and a few
# (aten/sort.py's sort.stable, sub.Scalar, randint.low, ...) RuntimeError("... ge_converter is not supported!").
_STUB_EXCEPTIONS = ("NotImplementedError", "RuntimeError")


def is_not_implemented_stub(fn: Callable | None) -> bool:
    """True if `fn`'s body is (a docstring and) only `raise NotImplementedError(...)` or
    `raise RuntimeError(...)`: a converter that lowers nothing."""
    if fn is None:
        return False
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return False
    tree = ast.parse(source)
    func = tree.body[0]
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = list(func.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]  # the docstring
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc
    name = exc.func if isinstance(exc, ast.Call) else exc
    return isinstance(name, ast.Name) and name.id in _STUB_EXCEPTIONS


def torchair_lowers(op: Any) -> bool:
    """`op` has a converter that does more than raise NotImplementedError."""
    fn = torchair_converter(op)
    return fn is not None and not is_not_implemented_stub(fn)


class TorchAirApi:
    """TorchAir as op_plugin's converters build with it (`ta`):

    - `ta.torchair`: the TorchAir module;
    - `ta.ge`: GE op builders generated from CANN's REG_OP prototypes (`ta.ge.Swish(x, scale=1.0)`);
    - `ta.graph`: the GE graph module (`Tensor`, `Const`, `Cast`, `DataType`,
      `torch_dtype_value_to_ge_type`);
    - `ta.utils`: TorchAir's converter helpers (the layout of an op's inputs and outputs);
    - `ta.dynamic_ge`: GE ops with a dynamic number of outputs (`GroupedMatmul`);
    - `ta.dtype_promote(*values, target_dtype=...)`: TorchAir's promotion of converter inputs;
    - `ta.is_arch35()`: TorchAir's check of the SoC generation (arch35: Ascend950);
    - `ta.converter(op)`: TorchAir's own converter of `op` (past any op_plugin converter installed
      over it), or None; `ta.lowering(op)`: the same, or NotImplementedError if TorchAir does not
      lower `op`;
    - `ta.op`, `ta.original`: the op a converter is installed for, and TorchAir's converter it
      completes or corrects (NotImplementedError if TorchAir had none).
    """

    def __init__(self, torchair: Any):
        self.torchair = torchair
        self.op: Any = None
        self._original: Callable | None = None
        self._modules: dict[str, Any] = {}  # shared by the views of `for_converter`

    def for_converter(self, op: Any, original: Callable | None = None) -> TorchAirApi:
        """This API for the converter of `op`, which replaces `original` (TorchAir's, or None)."""
        view = copy.copy(self)
        view.op, view._original = op, original
        return view

    def _module(self, path: str) -> Any:
        module = self._modules.get(path)
        if module is None:
            module = self._modules[path] = importlib.import_module(f"{self.torchair.__name__}.{path}")
        return module

    @property
    def ge(self) -> Any:
        return self._module("_ge_concrete_graph.auto_generated_ge_raw_ops")

    @property
    def graph(self) -> Any:
        return self._module("ge._ge_graph")

    @property
    def utils(self) -> Any:
        """TorchAir's converter helpers (`specific_op_input_layout`, `specific_op_output_layout`, ...)."""
        return self._module("_ge_concrete_graph.utils")

    @property
    def dynamic_ge(self) -> Any:
        return self._module("_ge_concrete_graph.dynamic_output_ops")

    def dtype_promote(self, *values: Any, target_dtype: Any) -> Any:
        return self._module("_ge_concrete_graph.utils").dtype_promote(*values, target_dtype=target_dtype)

    def is_arch35(self) -> bool:
        return self._module("_utils.check_platform").is_arch35()

    @staticmethod
    def converter(op: Any) -> Callable | None:
        fn = torchair_converter(op)
        while fn is not None and hasattr(fn, REPLACED):
            fn = getattr(fn, REPLACED)  # op_plugin's: TorchAir's is the one it replaced
        return fn

    def lowering(self, op: Any) -> Callable:
        fn = self.converter(op)
        if fn is None or is_not_implemented_stub(fn):
            raise NotImplementedError(f"op_plugin lowers this op as {op}, which this TorchAir does not lower")
        return fn

    @property
    def original(self) -> Callable:
        if self._original is None:
            raise NotImplementedError(f"this TorchAir has no converter for {self.op} to keep")
        return self._original
