"""`load_yaml` and `unload`: read, validate, then register a file's ops, all or none; the handle
`load_yaml` returns (`LoadedOps`) takes them back."""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .._base.errors import OpPluginError, YamlSpecError
from .._base.handles import RegistrationHandle
from .._ge.builtin_prototypes import builtin_prototype
from .._spec.ge_prototype import ir_prototype
from .._spec.model import OpSpec
from .._spec.names import torch_npu_clash
from .._spec.parse import parse_document
from .._spec.yaml_source import read_located
from .library import exists_in_dispatcher, register_library
from .op_state import OpState, Piece, check_piece_allowed, find, forget, loaded, qualify, state


@dataclass(frozen=True)
class LoadedFile:
    """The ops one `load_yaml` call registered, and the handle of their torch.library fragment."""

    specs: tuple[OpSpec, ...]
    library: RegistrationHandle
    path: Path | None = None     # the file, resolved
    digest: str | None = None    # sha256 of its bytes when loaded


_LOADED: dict[str, LoadedFile] = {}   # qualname -> the file that registered it
# Called with each newly registered OpState (e.g. to attach a GE converter); may raise to abort the load.
_load_hooks: list[Callable[[OpState], None]] = []


class LoadedOps(Sequence[str]):
    """What `op_plugin.load_yaml(path)` returns: the qualified names it loaded, as a read-only sequence
    (it iterates, indexes and compares equal to the list of names, `["npu::my_op"]`), and the handle
    that takes them back.

    `unload()` removes exactly the ops of that load (their torch.library fragment, Meta functions,
    converters and every other registration made for them), after which the file can be loaded again.
    It is harmless to call twice. Loading the same unchanged file again returns another handle for the
    same load: the ops are unloaded once, by whichever handle calls first; the other's `unload()` then
    does nothing, as it does once the file has been unloaded and loaded anew (that load has its own
    handle).
    """

    __slots__ = ("_names", "_file")

    def __init__(self, loaded_file: LoadedFile):
        object.__setattr__(self, "_file", loaded_file)
        object.__setattr__(self, "_names", tuple(spec.qualname for spec in loaded_file.specs))

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __getitem__(self, index):
        return self._names[index] if isinstance(index, int) else list(self._names[index])

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __eq__(self, other) -> bool:
        if isinstance(other, LoadedOps):
            return self._names == other._names
        if isinstance(other, (list, tuple)):
            return list(self._names) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._names)

    @property
    def path(self) -> Path | None:
        """The YAML file, resolved."""
        return self._file.path

    @property
    def loaded(self) -> bool:
        """Whether the ops of this load are still registered (False after `unload()`)."""
        return _is_current(self._file)

    def unload(self) -> None:
        """Remove the ops of this load; a second call, or a call after another handle of the same load
        unloaded them, does nothing."""
        if _is_current(self._file):
            _unload_file(self._file)

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else "unloaded"
        return f"<LoadedOps {list(self._names)!r} from {self._file.path or '?'} ({state})>"


def _is_current(loaded_file: LoadedFile) -> bool:
    return all(_LOADED.get(spec.qualname) is loaded_file for spec in loaded_file.specs)


def _unload_file(loaded_file: LoadedFile) -> None:
    for spec in loaded_file.specs:
        if _LOADED.get(spec.qualname) is loaded_file:
            forget(spec.qualname)
            _LOADED.pop(spec.qualname, None)
    loaded_file.library.destroy()


def add_load_hook(hook: Callable[[OpState], None]) -> RegistrationHandle:
    """Call `hook(state)` for every op a later `load_yaml` registers; raising aborts that load."""
    _load_hooks.append(hook)
    return RegistrationHandle(lambda: _load_hooks.remove(hook), f"load hook {hook!r}")


def parse_yaml(path: str | Path) -> tuple[OpSpec, ...]:
    """Read and validate a YAML file on its own (its syntax, schemas, fields), registering nothing;
    `check_yaml` adds the checks against what is already loaded and defined."""
    return parse_document(read_located(path))


def check_yaml(path: str | Path, earlier: Sequence[OpSpec] = ()) -> tuple[tuple[OpSpec, ...], list[YamlSpecError]]:
    """Every check `load_yaml(path)` makes before it registers anything, registering nothing
    (`op-plugin validate`): the file's specs and the reasons `load_yaml` would refuse them here (empty:
    it would load them). A file whose specs are invalid raises YamlSpecError, as `load_yaml` does;
    `earlier`: the ops of files to count as loaded before this one (validate's earlier arguments)."""
    if _loaded_before(path) is not None:
        return parse_yaml(path), []   # loading it again is a no-op
    specs = parse_yaml(path)
    return specs, load_problems(specs, earlier)


def load_problems(specs: Sequence[OpSpec], earlier: Sequence[OpSpec] = ()) -> list[YamlSpecError]:
    """Why `load_yaml` would refuse one file's (parsed) ops in this process, in the order it checks
    (it raises the first; `op-plugin validate` reports them all): a name loaded from another file (or
    from `earlier`), one of torch_npu's own operators (the pinned wheel's operator list, whether or
    not this process defined them) or defined by another library, an overload of an op defined
    elsewhere, one GE type declared with two prototypes, a custom GE type claimed by two ops."""
    specs = tuple(specs)
    already_loaded = [st.spec for st in loaded()] + list(earlier)
    problems: list[YamlSpecError] = []
    for index, spec in enumerate(specs):
        before = already_loaded + list(specs[:index])
        for check, arguments in ((_check_new, (spec, specs, earlier)), (_check_ge_prototype, (spec, before)),
                                 (_check_custom_type_owner, (spec, before))):
            try:
                check(*arguments)
            except YamlSpecError as problem:
                problems.append(problem)
    return problems


def load_yaml(path: str | Path) -> LoadedOps:
    """Register every op of a YAML file; return a `LoadedOps` handle: their qualified names, e.g.
    ["npu::npu_layer_scale"], as a sequence, whose `unload()` takes the ops back.

    The file is validated completely before anything is registered, and if any registration step
    fails, everything this call registered is removed again: a file registers all its ops or none.

    Loading the same file again is a no-op that returns a handle for the same load (an import run
    twice, a notebook cell run again); a file changed since it was loaded is an error naming what to do.
    """
    again = _loaded_before(path)
    if again is not None:
        return LoadedOps(again)
    specs = parse_yaml(path)
    problems = load_problems(specs)
    if problems:
        raise problems[0]
    library = register_library(specs)
    registered: list[OpState] = []
    try:
        for spec in specs:
            st = state(spec.qualname)
            st.spec = spec
            registered.append(st)
            for piece in (Piece.META, Piece.BACKWARD, Piece.SETUP_CONTEXT):
                if st.piece(piece) is not None:
                    check_piece_allowed(st, piece)
            for hook in list(_load_hooks):
                hook(st)
    except Exception:
        for st in registered:
            forget(st.qualname)
        library.destroy()
        raise
    resolved = Path(path).resolve()
    loaded_file = LoadedFile(specs, library, resolved, _digest(resolved))
    for spec in specs:
        _LOADED[spec.qualname] = loaded_file
    return LoadedOps(loaded_file)


def loaded_file_digests() -> list[str]:
    """The sha256 of every YAML file loaded now (a compile cache's key: a changed file is another lowering)."""
    return sorted({f"{loaded.path}:{loaded.digest}" for loaded in _LOADED.values()})


def is_loaded(name: str) -> bool:
    """Whether a YAML op is registered now: `is_loaded("npu_layer_scale")` (or "npu::npu_layer_scale").
    A YAML file's path works too: whether every op of that file was loaded from it."""
    if isinstance(name, Path) or str(name).endswith((".yaml", ".yml")):
        return _loaded_before(name, check_changed=False) is not None
    st = find(name)
    return st is not None and st.spec is not None


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _loaded_before(path: str | Path, check_changed: bool = True) -> LoadedFile | None:
    """The LoadedFile of this very file when all its ops are still loaded from it; a file changed
    since is an error (check_changed) or not loaded."""
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError):
        return None
    files = {id(f): f for f in _LOADED.values() if f.path == resolved}
    if not files:
        return None
    (loaded_file, *_) = files.values()
    if not _is_current(loaded_file):
        return None
    if _digest(resolved) != loaded_file.digest:
        if not check_changed:
            return None
        names = ", ".join(spec.qualname for spec in loaded_file.specs)
        first = loaded_file.specs[0]
        raise YamlSpecError(first.field("func"), f"the file changed since it was loaded ({names}); a registered op "
                            "cannot be redefined in the same process: restart Python, or unload it first "
                            "with the handle load_yaml returned (ops = op_plugin.load_yaml(path); ops.unload())")
    return loaded_file


def unload(qualname: str) -> None:
    """Remove every op registered together with `qualname` (its whole file); users call the
    `LoadedOps.unload()` of the handle `load_yaml` returned."""
    qualname = qualify(qualname)
    loaded_file = _LOADED.get(qualname)
    if loaded_file is None:
        raise OpPluginError(f"{qualname} was not loaded by op_plugin.load_yaml")
    _unload_file(loaded_file)


def _check_ge_prototype(spec: OpSpec, others: list[OpSpec]) -> None:
    """One GE type has one prototype: two ops declaring it differently cannot both be right."""
    if spec.ge is None:
        return
    declared = ir_prototype(spec)
    for other in others:
        if other.ge is not None and other.ge.type == spec.ge.type and ir_prototype(other) != declared:
            raise YamlSpecError(spec.field("ge"), f"GE type {spec.ge.type} is already declared by {other.qualname} "
                                f"({other.location.file_line}) with another prototype "
                                f"({_describe(ir_prototype(other))}, "
                                f"here {_describe(declared)}); use another `ge.type` or the same inputs, attrs "
                                "and outputs")


def _check_custom_type_owner(spec: OpSpec, others: list[OpSpec]) -> None:
    """A custom GE type (not a CANN built-in) runs one kernel, so it belongs to one op: a second op
    claiming it is refused here, when its file loads, naming both places. Found only at the first
    compile, the conflict would fail that compile and every later one in the process, for every op.
    An op with a hand-written converter emits other GE ops: its `ge.type` claims nothing."""
    if spec.ge is None or _has_converter(spec):
        return
    owner = next((o for o in others if o.ge is not None and o.ge.type == spec.ge.type
                  and o.qualname != spec.qualname and not _has_converter(o)), None)
    if owner is None or _is_builtin_ge_type(spec.ge.type):
        return
    raise YamlSpecError(spec.field("ge.type"), f"custom GE type {spec.ge.type} is already the type of "
                        f"{owner.qualname} ({owner.location.file_line}); a custom GE type runs one kernel, so it "
                        "belongs to one op: give this op its own `ge.type` (or attach its @op_plugin.converter "
                        "before loading the file)")


def _has_converter(spec: OpSpec) -> bool:
    st = find(spec.qualname)
    return st is not None and st.converter is not None


def _is_builtin_ge_type(ge_type: str) -> bool:
    """CANN ships a prototype and kernel for `ge_type` (TorchAir's generated op table, read from the
    unpacked wheel on first use: only asked when two ops share a type). Without the wheel nothing
    can tell, and nothing is refused: the simulator, which a shared custom type would break, needs
    the wheel too."""
    try:
        return builtin_prototype(ge_type) is not None
    except OSError:
        return True


def _describe(prototype) -> str:
    names = lambda params: ", ".join(p.name for p in params)  # noqa: E731
    return f"inputs [{names(prototype.inputs)}], attrs [{names(prototype.attrs)}], outputs [{names(prototype.outputs)}]"


def _check_new(spec: OpSpec, file_specs: tuple[OpSpec, ...], earlier: Sequence[OpSpec] = ()) -> None:
    existing = find(spec.qualname)
    location = spec.field("func")
    first = (existing.spec.location if existing is not None and existing.spec is not None
             else next((o.location for o in earlier if o.qualname == spec.qualname), None))
    if first is not None:
        raise YamlSpecError(location, f"{spec.qualname} is already loaded from {first.file_line}")
    clash = torch_npu_clash(spec.namespace, spec.name, spec.schema.overload)
    if clash:  # from the wheel's operator list: the same answer whether or not this process defined them
        raise YamlSpecError(location, clash)
    if exists_in_dispatcher(spec):
        raise YamlSpecError(location, f"{spec.qualname} already exists in the '{spec.namespace}' namespace "
                            "(defined by torch_npu or another library); choose another name")
    if spec.schema.overload and not any(s.name == spec.name and not s.schema.overload for s in file_specs):
        packet = f"{spec.namespace}::{spec.name}"
        if any(name == packet or name.startswith(packet + ".") for name in torch._C._dispatch_get_all_op_names()):
            raise YamlSpecError(location, f"{packet} is defined elsewhere; a file may add overloads only to ops it "
                                "defines itself, so existing calls keep resolving to the op they meant")
