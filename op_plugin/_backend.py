"""Stage 5: the `npugraph` torch.compile backend, which picks the host.

    torch.compile(model, backend="npugraph")                         # mode "ge"
    torch.compile(model, backend="npugraph", options={"mode": "ge", "dump": "pbtxt"})
    torch.compile(model, backend="npugraph", options={"mode": "aclgraph"})           # TorchAir's npugraph_ex
    torch.compile(model, backend=op_plugin.npugraph_backend(mode="ge", dump="txt", dump_dir="dumps"))
    torch.compile(model, backend="npugraph", options={"torchair_gelu": True, "soc": "Ascend950"})
    torch.compile(model, backend="npugraph", options={"frozen_parameter": True})   # TorchAir's CompilerConfig

On an Ascend host (torch_npu imports and an NPU is present) the graph goes to TorchAir's own
backend on the NPU. Anywhere else it goes to the simulator: the same TorchAir code lowers the graph
with the same converters, and the GE executor runs the resulting GE graph on the CPU. There is no
silent fallback: if neither is available, compiling fails with one line saying how to install.
On the simulator, dynamo's graph is first made the one an Ascend host traces
(`_simulator.npu.dispatch`); on both hosts the numeric corrections of TorchAir's lowering apply
unless `torchair_gelu=True` (docs/npu-faithful-lowering.md).

May import: `op_plugin._base`, `_registry`, `_lowering`, `_simulator` (only its lazily loaded names, the
SoC list of `_simulator.npu.dispatch`, which needs nothing but torch, and, on the virtual NPU, what an Ascend
program imports: `_simulator.hosting.user_imports`), torch.
Never the tools.
"""
from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from inspect import Parameter, Signature
from types import NoneType, UnionType
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import torch

from . import _simulator
from ._base.errors import OpPluginError
from ._base.gc_scope import freeze_new_objects, old_objects_frozen
from ._base.installed import real_torch_npu
from ._base.wheel import TORCH_NPU_VERSION
from ._lowering.install import install_converters, refresh_library_converters
from ._lowering.numeric_corrections import keep_torchair_lowering
from ._registry.fake_overrides import warn_replaced_fakes
from ._simulator.npu.dispatch import SOCS

Mode = Literal["ge", "aclgraph"]
DumpFormat = Literal["txt", "pbtxt", "py"]
# torch.compile(mode=...) strings, mapped the way TorchAir maps them.
_TORCH_COMPILE_MODES = {None: "ge", "default": "ge", "max-autotune": "ge", "reduce-overhead": "aclgraph"}


@dataclass(frozen=True)
class NpuGraphConfig:
    """Options of the npugraph backend, declared once: each field is one option, with its type (the
    annotation; a Literal lists the accepted values), its default and a one-line help (metadata
    "help"; "choices" where the type does not list the values). `npugraph_backend(**options)`,
    `torch.compile(backend="npugraph", options={...})`, the keyword options of `op_plugin.compare`
    and `op_plugin.inspect` (all through `from_options`) and the `op-plugin compare` / `inspect`
    flags (from `option_specs`) derive from these fields: a new option is one field here and its
    use in `compile_graph`."""

    mode: Mode = field(default="ge", metadata={
        "help": "'ge': the whole graph through the GE converters; 'aclgraph': TorchAir's npugraph_ex backend "
                "(eager kernels and Meta functions captured as an ACL graph)"})
    dump: DumpFormat | None = field(default=None, metadata={
        "help": "write each GE graph in this TorchAir dump format (default: no dump)"})
    dump_dir: str | None = field(default=None, metadata={
        "help": "folder for the dumps (default: the working folder, as TorchAir does)"})
    torchair_gelu: bool = field(default=False, metadata={
        "help": "keep TorchAir's lowering of aten.gelu/gelu_backward verbatim (GE Gelu, the tanh form, for "
                "approximate='none' too) instead of GeluV2/GeluGradV2"})
    soc: str = field(default="Ascend910", metadata={
        "help": "simulator only: the Ascend SoC whose dispatch is traced (it picks torch_npu's SDPA branch)",
        "choices": SOCS})
    # Off by default, so each view op is lowered by its own converter: the optimisation drops a
    # transpose when a reshape follows a transposed view of a non-contiguous result (wrong numbers,
    # silently), and it compares symbolic sizes with static ones, so a sequence length equal to a
    # head count or head dim at the first call specialises or guards that length and later lengths
    # recompile. docs/npu-faithful-lowering.md has both reproducers.
    torchair_view_optimize: bool = field(default=False, metadata={
        "help": "keep TorchAir's view optimisation (enable_view_optimize, TorchAir's default), which npugraph "
                "leaves off: it can drop a transpose before a reshape"})

    compile_cache: bool = field(default=True, metadata={
        "help": "simulator only: reuse TorchAir's lowering of a graph compiled before, in this process or another "
                "(a signed cache under ~/.cache/op_plugin; OP_PLUGIN_COMPILE_CACHE=0 turns it off everywhere, "
                "OP_PLUGIN_CACHE_DIR moves it; docs/performance-notes.md)"})

    # TorchAir CompilerConfig options, passed through (metadata "torchair": the CompilerConfig attribute).
    frozen_parameter: bool = field(default=False, metadata={
        "torchair": "experimental_config.frozen_parameter",
        "help": "TorchAir's experimental_config.frozen_parameter: parameters and buffers are treated as constant "
                "inputs of the GE graph (inference)"})
    keep_inference_input_mutations: bool = field(default=True, metadata={
        "torchair": "experimental_config.keep_inference_input_mutations",
        "help": "TorchAir's experimental_config.keep_inference_input_mutations: an in-place update of a graph input "
                "stays in the graph under no_grad"})
    topology_sorting_strategy: Literal["BFS", "DFS", "RDFS", "StableRDFS"] = field(default="DFS", metadata={
        "torchair": "experimental_config.topology_sorting_strategy",
        "help": "TorchAir's experimental_config.topology_sorting_strategy: the order GE sorts the graph's nodes in"})

    def __post_init__(self):
        for spec in option_specs():
            spec.check(getattr(self, spec.name))

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> NpuGraphConfig:
        """The config of these keyword options; an unknown name is an error listing the valid ones."""
        names = [spec.name for spec in option_specs()]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise OpPluginError(f"npugraph: unknown option(s) {unknown}; options are {', '.join(names)}")
        return cls(**options)


@dataclass(frozen=True)
class OptionSpec:
    """One field of NpuGraphConfig, read from its annotation and metadata."""

    name: str
    annotation: Any
    default: Any
    help: str
    choices: tuple | None    # the accepted values, None: any value of the type
    optional: bool           # None is accepted
    flag: bool               # a bool option: True or False only

    def check(self, value: Any) -> None:
        if value is None and self.optional:
            return
        if self.flag and not isinstance(value, bool):
            raise OpPluginError(f"npugraph: {self.name} must be True or False, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise OpPluginError(f"npugraph: {self.name} must be one of {self.choices}"
                                f"{' or None' if self.optional else ''}, got {value!r}")


@cache
def option_specs() -> tuple[OptionSpec, ...]:
    """The backend's options in declaration order (NpuGraphConfig's fields)."""
    hints = get_type_hints(NpuGraphConfig)
    specs = []
    for f in fields(NpuGraphConfig):
        annotation = hints[f.name]
        members = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
        (base,) = [m for m in members if m is not NoneType]
        choices = get_args(base) if get_origin(base) is Literal else f.metadata.get("choices")
        specs.append(OptionSpec(f.name, annotation, f.default, f.metadata["help"], choices,
                                optional=NoneType in members, flag=base is bool))
    return tuple(specs)


def npugraph_backend(**options: Any) -> Callable:
    """A torch.compile backend with these options (keyword arguments, NpuGraphConfig's fields)."""
    config = NpuGraphConfig.from_options(options)

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        return compile_graph(gm, example_inputs, config)

    backend.config = config
    return backend


# help(npugraph_backend) and editors show the options as keyword-only parameters, from the fields.
npugraph_backend.__signature__ = Signature(
    [Parameter(s.name, Parameter.KEYWORD_ONLY, default=s.default, annotation=s.annotation) for s in option_specs()],
    return_annotation=Callable)
npugraph_backend.__doc__ += "\n\n" + "\n".join(f"    {s.name}: {s.help}" for s in option_specs())


def npugraph(gm: torch.fx.GraphModule, example_inputs: list, mode: str | None = None,
             options: dict | None = None) -> Callable:
    """The `torch_dynamo_backends` entry point: torch.compile(backend="npugraph", mode=..., options={...})."""
    if mode not in _TORCH_COMPILE_MODES:
        raise OpPluginError(f"npugraph: torch.compile mode {mode!r} is not supported; "
                            f"use one of {[m for m in _TORCH_COMPILE_MODES if m]} or options={{'mode': ...}}")
    settings = {"mode": _TORCH_COMPILE_MODES[mode], **(options or {})}
    return compile_graph(gm, example_inputs, NpuGraphConfig.from_options(settings))


def on_ascend_host() -> bool:
    """The installed torch_npu imports and reports an NPU. Never true on a host without CANN, nor for a
    folder that merely shares torch_npu's name (`_base.installed`: never imported)."""
    if not real_torch_npu():
        return False
    from ._simulator.device.torch_npu_facade import is_facade

    if is_facade(sys.modules.get("torch_npu")):  # the virtual NPU's torch_npu (docs/virtual-npu.md): a CPU host
        return False
    try:
        import torch_npu  # noqa: F401
    except Exception:  # torch_npu installed without CANN: not an Ascend host
        return False
    return bool(getattr(torch, "npu", None) and torch.npu.is_available())


def prepare_host() -> bool:
    """Called by `import op_plugin`. On an Ascend host, give TorchAir op_plugin's converters now, so
    TorchAir's own backends (`torchair.get_npu_backend()`, npugraph_ex, vllm-ascend's) lower the YAML
    ops without an npugraph compile first; returns True. Elsewhere TorchAir is the simulator's,
    which costs seconds to load and only npugraph needs; but code written for an Ascend host calls
    `torch.ops.npu.npu_rms_norm` & co. before any compile (dynamo looks them up while tracing), so
    the simulator defines those torch_npu ops now (from the unpacked wheel, if installed), and
    makes a distributed process load TorchAir at dynamo's first trace, so TorchAir's collective
    remaps (dist.broadcast, all_to_all, send/recv) are in place for it as on an Ascend host."""
    if not on_ascend_host():
        _simulator.define_npu_ops()
        _simulator.load_torchair_before_collectives_trace()
        _serve_ascend_imports_on_the_virtual_npu()
        return False
    import torchair  # shipped inside torch_npu; importable once torch_npu is

    install_converters(torchair)
    return True


def npugraph_ex(gm: torch.fx.GraphModule, example_inputs: list, mode: str | None = None,
               options: dict | None = None) -> Callable:
    """`torch.compile(backend="npugraph_ex")`. op_plugin declares the name as an entry point (so registering
    it costs `import op_plugin` nothing: dynamo finds it when it looks the name up). torch_npu declares it too;
    with torch_npu installed this is torch_npu's backend, whichever of the two entries dynamo picked. On a CPU
    host it is npugraph's mode "aclgraph" (docs/virtual-npu.md for the virtual NPU)."""
    if real_torch_npu():
        return _torch_npu_npugraph_ex()(gm, example_inputs, mode=mode, options=options)
    del mode  # npugraph_ex has one mode
    return compile_graph(gm, example_inputs, NpuGraphConfig.from_options({**(options or {}), "mode": "aclgraph"}))


def _torch_npu_npugraph_ex() -> Callable:
    """torch_npu's own `npugraph_ex` entry point (torch_npu.dynamo's), never op_plugin's."""
    from importlib.metadata import entry_points

    for entry in entry_points(group="torch_dynamo_backends", name="npugraph_ex"):
        if entry.dist is not None and entry.dist.name.replace("_", "-").lower() == "torch-npu":
            return entry.load()
    raise OpPluginError("npugraph_ex: torch_npu is installed but declares no npugraph_ex backend; "
                        "reinstall torch-npu 2.13.0")


def _serve_ascend_imports_on_the_virtual_npu() -> None:
    """On the virtual NPU (docs/virtual-npu.md), `import torchair` and dynamo's backend "npu" work as on an
    Ascend host, where torch_npu provides them: both give `load_torchair()`'s TorchAir."""
    from ._simulator.device.activation import should_activate

    if should_activate():
        from ._simulator.hosting import user_imports

        user_imports.install(load_torchair)


def load_torchair_for_host(force_simulator: bool = False) -> tuple[Any, bool]:
    """(torchair, simulated): TorchAir from torch_npu on an Ascend host, else the simulator's."""
    if not force_simulator and on_ascend_host():
        import torchair  # shipped inside torch_npu; importable once torch_npu is

        return torchair, False
    return _simulator.load_simulated_torchair(), True


def load_torchair() -> Any:
    """The `torchair` module of this host, with every YAML op lowered: TorchAir's own API
    (`torchair.get_npu_backend(compiler_config=...)`, its graph and data dumps, `frozen_parameter`,
    `register_fx_node_ge_converter`, `ge.custom_op`) then works with YAML ops, as on an Ascend host.

    On an Ascend host this is torch_npu's TorchAir (`import torchair` works too). On a CPU host it
    is the simulator's (the unpacked torch-npu wheel; `import torchair` works after this call):
    the YAML ops' converters are installed on it, and their custom GE types get an IR prototype
    and an executor kernel, now for the YAML loaded so far and at `load_yaml` for later ones. Any
    order of calls works (before or after `load_yaml`, before or after an npugraph compile);
    calling it again returns the same module."""
    if not on_ascend_host():
        # the simulator's, set up by the simulator (custom GE types also need an IR prototype and an
        # executor kernel there); its earlier private loader does the same
        return _simulator.torchair_with_yaml_ops()
    torchair, _ = load_torchair_for_host()
    install_converters(torchair, op_hook=None)
    refresh_library_converters()  # a model library imported since (transformers' MoE ops)
    return torchair


def compile_graph(gm: torch.fx.GraphModule, example_inputs: list, config: NpuGraphConfig,
                  force_simulator: bool = False) -> Callable:
    # The collector walks only what this compile makes (and TorchAir's modules, if it loads them now):
    # torch's and TorchAir's long-lived objects are not walked again at each full collection (_base/gc_scope.py).
    with old_objects_frozen():
        return _compile_graph(gm, example_inputs, config, force_simulator)


def _compile_graph(gm: torch.fx.GraphModule, example_inputs: list, config: NpuGraphConfig,
                   force_simulator: bool) -> Callable:
    if any(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in example_inputs):
        # Meta inputs (shapes only, as for counting a model's sizes): eager answers with meta results from
        # the Meta functions, and so does this graph, run as it is; nothing is lowered or simulated (a GE
        # graph has no meta device: the simulator would be handed tensors without data).
        return gm.forward
    torchair, simulated = load_torchair_for_host(force_simulator)
    freeze_new_objects()  # TorchAir's, when it has just loaded
    warn_replaced_fakes()  # a user's torch.library.register_fake on a YAML op: theirs is used, said once
    if simulated:
        from ._simulator.npu.dispatch import rewrite_for_npu

        rewrite_for_npu(gm, config.soc)  # trace what an Ascend host traces
    # On the simulator, custom GE types also need an IR prototype and an executor kernel.
    install_converters(torchair, op_hook=_simulator.lowering_hook if simulated else None)
    refresh_library_converters()  # a model library imported since (transformers' MoE ops)
    if config.mode == "aclgraph" and config.dump:
        _warn_once("npugraph: the dump option writes GE graphs; mode 'aclgraph' (npugraph_ex) builds none, "
                   "so nothing is dumped")
    if config.mode == "aclgraph" and simulated and _on_the_virtual_npu(example_inputs):
        # The virtual NPU: TorchAir's npugraph_ex mode captures the eager kernels into the virtual NPUGraph
        # (docs/virtual-npu.md), as torch_npu's npugraph_ex backend does on an NPU with its copy of TorchAir.
        compiler_config = torchair.CompilerConfig()
        compiler_config.mode = "npugraph_ex"
        return torchair.get_npu_backend(compiler_config=compiler_config)(gm, example_inputs)
    if config.mode == "aclgraph" and simulated:
        # npugraph_ex runs the eager kernels inside a captured ACL graph, which needs an NPU. Its
        # numerics are those of the functionalized FX graph with the eager (reference) kernels,
        # which is what AOT autograd runs here. Said, not silent:
        from torch._dynamo.backends.debugging import aot_eager

        _warn_once("npugraph: mode 'aclgraph' on a CPU host runs the AOT graph with the reference kernels "
                   "(ACL graph capture needs an NPU)")
        return aot_eager(gm, example_inputs)
    if config.mode == "aclgraph":
        return _npugraph_ex_backend()(gm, example_inputs)
    compiler_config = torchair.CompilerConfig()
    compiler_config.mode = "max-autotune"
    compiler_config.experimental_config.enable_view_optimize = config.torchair_view_optimize
    for f in fields(NpuGraphConfig):  # the CompilerConfig options passed through
        if "torchair" in f.metadata:
            owner_path, _, attr = f.metadata["torchair"].rpartition(".")
            owner = compiler_config
            for part in owner_path.split(".") if owner_path else ():
                owner = getattr(owner, part)
            setattr(owner, attr, getattr(config, f.name))
    if config.dump:
        compiler_config.debug.graph_dump.type = config.dump
        if config.dump_dir:
            os.makedirs(config.dump_dir, exist_ok=True)
            compiler_config.debug.graph_dump.path = config.dump_dir
    if simulated and config.compile_cache:
        _simulator.enable_compile_cache(compiler_config, _cache_details(config))
    backend = torchair.get_npu_backend(compiler_config=compiler_config)
    if not config.torchair_gelu:
        return backend(gm, example_inputs)
    # Keeping TorchAir's lowering is scoped to this compile; its backward graph is therefore
    # compiled now, not at the first backward (AOT autograd's default), so the option reaches it.
    with keep_torchair_lowering(), torch._functorch.config.patch(force_non_lazy_backward_lowering=True):
        return backend(gm, example_inputs)


def _cache_details(config: NpuGraphConfig) -> dict:
    """What npugraph adds to the compile cache's key: its options, the YAML files loaded (their bytes) and
    op_plugin's own source, all of which change a lowering."""
    from ._registry.load import loaded_file_digests

    return {"options": {f.name: repr(getattr(config, f.name)) for f in fields(NpuGraphConfig)},
            "yaml": loaded_file_digests(), "op_plugin_source": _simulator.source_digest(),
            "torch_npu_wheel": TORCH_NPU_VERSION}


def _on_the_virtual_npu(example_inputs) -> bool:
    """The virtual NPU is active and the graph's inputs are npu tensors (CPU tensors keep the CPU-host path)."""
    from ._simulator.device.activation import is_active

    return is_active() and any(isinstance(t, torch.Tensor) and t.device.type == "npu" for t in example_inputs)


def _npugraph_ex_backend() -> Callable:
    """The backend `torch.compile(backend="npugraph_ex")` uses: torch_npu registers it (entry point
    `torch_npu.dynamo:_npugraph_ex_backend_entrypoint`, TorchAir's npugraph_ex with
    CompilerConfig.mode "npugraph_ex"). TorchAir's "reduce-overhead" mode, which aclgraph used, is
    deprecated in the pinned TorchAir in favour of it. npugraph_ex runs the ops' eager NPU kernels
    and their Meta functions inside a captured ACL graph: no GE converter is involved."""
    from torch._dynamo import lookup_backend

    return lookup_backend("npugraph_ex")


def _warn_once(message: str) -> None:
    # The default warnings filter shows a given message once per call site.
    warnings.warn(message, UserWarning, stacklevel=3)


def register_ge_kernel(op_type: str, kernel, *, replace: bool = False):
    """Make the CPU simulator run `kernel` for GE nodes of `op_type` (a type it has no kernel for, or,
    with `replace=True`, instead of its built-in one); returns a handle whose `destroy()` undoes it.

    `kernel` takes the node's inputs by position (as CANN's prototype of the type orders them: a
    dynamic input as a list, an optional input left unfed as None) and its attrs as keyword arguments,
    and returns its output tensor(s). Only the simulator uses it: on an Ascend host GE runs CANN's
    kernels."""
    return _simulator.register_ge_kernel(op_type, kernel, replace=replace)
