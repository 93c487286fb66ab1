"""Every way a YAML file can be wrong gives a YamlSpecError that points at the right place, and
registers nothing.

The corpus lives in tests/broken_yaml/: one problem per file, each otherwise valid and defining at
least two ops. Each file starts with header comments:

    # expect-line: <1-based line the error must point at>
    # expect-op: <op name as reported, or - for None>
    # expect-field: <field path as reported, or - for None>
    # expect-message: <substring of the message>
    # ops: <qualified names the file would define, or ->
    # known-gap: <why>          (optional: the validator gets this case wrong today; strict xfail)
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import op_plugin
from op_plugin import _registry
from op_plugin._base.handles import RegistrationHandle
from op_plugin._registry import library as _library
from op_plugin._registry import load as _load

CORPUS = Path(__file__).resolve().parent / "broken_yaml"
CASES = sorted(CORPUS.glob("*.yaml"))
HEADER = re.compile(r"^#\s*([a-z-]+):\s*(.*?)\s*$")
REQUIRED_HEADERS = ("expect-line", "expect-op", "expect-field", "expect-message", "ops")

# Snapshot of the ops shipped with op_plugin (registered on import), before any test runs.
SHIPPED = {st.qualname: st.spec for st in _registry.loaded()}


def read_headers(path: Path) -> dict[str, str]:
    headers = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = HEADER.match(line)
        if not m:
            break
        headers[m.group(1)] = m.group(2)
    missing = [h for h in REQUIRED_HEADERS if h not in headers]
    assert not missing, f"{path.name}: missing header(s) {missing}"
    return headers


def none_if_dash(value: str) -> str | None:
    return None if value == "-" else value


def qualnames(value: str) -> list[str]:
    return [] if value == "-" else [n.strip() for n in value.split(",") if n.strip()]


def in_dispatcher(qualname: str) -> bool:
    name, _, overload = qualname.partition(".")
    try:
        torch._C._dispatch_find_schema_or_throw(name, overload)
        return True
    except RuntimeError:
        return False


def assert_not_registered(qualname: str) -> None:
    assert not in_dispatcher(qualname), f"{qualname} was left in the dispatcher"
    st = _registry.find(qualname)
    assert st is None or st.spec is None, f"{qualname} was left in op_plugin's registry"
    assert qualname not in _load._LOADED


def _params():
    params = []
    for path in CASES:
        gap = read_headers(path).get("known-gap")
        marks = [pytest.mark.xfail(strict=True, reason=f"known gap: {gap}")] if gap else []
        params.append(pytest.param(path, id=path.stem, marks=marks))
    return params


def test_corpus_is_big_enough():
    assert len(CASES) >= 30
    file_level = [p for p in CASES if read_headers(p)["expect-op"] == "-"]
    not_first = []
    for p in CASES:
        h = read_headers(p)
        ops = qualnames(h["ops"])
        if h["expect-op"] != "-" and ops and not ops[0].endswith("::" + h["expect-op"]):
            not_first.append(p)
    assert len(not_first) * 2 >= len(CASES), "the broken op should not be the first op in most files"
    assert len(file_level) < len(CASES)


@pytest.mark.parametrize("path", _params())
def test_broken_yaml(path: Path, capfd):
    headers = read_headers(path)
    ops = qualnames(headers["ops"])
    # Names that exist before the load (shipped ops, torch's own ops) must survive it untouched;
    # every other name must still be absent afterwards.
    existing = [q for q in ops if in_dispatcher(q)]
    new_ops = [q for q in ops if q not in existing]
    for q in ops:  # corpus names are unique: a leftover from another test would void the checks below
        assert "npu_broken_" not in q or q not in existing, f"{q} is registered before the test"
    before = {q: (_registry.find(q).spec if _registry.find(q) else None) for q in existing}

    given = str(path)
    try:
        names = op_plugin.load_yaml(given)
    except op_plugin.YamlSpecError as exc:
        err = exc
    else:  # a validator gap: undo the registration so later tests see a clean namespace
        _load.unload(names[0])
        pytest.fail(f"{path.name} loaded without error: {names}")
    loc = err.location

    assert loc.file == given
    assert str(err).startswith(f"{given}:{loc.line}:"), str(err)
    assert (loc.line, loc.op, loc.field) == (
        int(headers["expect-line"]), none_if_dash(headers["expect-op"]), none_if_dash(headers["expect-field"])
    ), str(err)
    assert headers["expect-message"] in str(err), str(err)

    for q in new_ops:
        assert_not_registered(q)
    for q in existing:  # a clash with an existing op leaves that op as it was
        assert in_dispatcher(q)
        st = _registry.find(q)
        assert (st.spec if st else None) is before[q]
        if q in SHIPPED:
            assert before[q] is SHIPPED[q]
    # Nothing in a YAML file is executed (tests/broken_yaml/python_tag*.yaml would print "pwned").
    assert "pwned" not in capfd.readouterr().out


# ---------------------------------------------------------------- loading that gets past validation

GOOD = """\
namespace: npu
ops:
  - func: {a}(Tensor x) -> Tensor
    doc: x + 1
    outputs:
      - size: x.shape
        dtype: x
    dtypes: [float32]
  - func: {b}(Tensor x, int k) -> Tensor
    doc: x repeated k times along a new leading dim
    outputs:
      - size: "[k, *x.shape]"
        dtype: x
    dtypes: [float32]
"""


def _good_file(tmp_path: Path, stem: str) -> tuple[Path, str, str]:
    a, b = f"npu_yaml_errors_{stem}_a", f"npu_yaml_errors_{stem}_b"
    path = tmp_path / f"{stem}.yaml"
    path.write_text(GOOD.format(a=a, b=b), encoding="utf-8")
    return path, f"npu::{a}", f"npu::{b}"


@pytest.fixture
def cleanup():
    """Unloads (by qualname) everything a test loaded, and detaches its reference kernels."""
    loaded: list[str] = []
    yield loaded
    for q in loaded:
        if q in _load._LOADED:
            _load.unload(q)
        _registry.detach(q, "reference")


def test_second_load_of_same_file_is_a_no_op_a_changed_file_fails_and_keeps_first(tmp_path, cleanup):
    """Loading the same file again returns its names and registers nothing (an import or a notebook
    cell run twice, issue 25); the file changed since is a located error and the first stays."""
    path, qa, qb = _good_file(tmp_path, "twice")
    names = op_plugin.load_yaml(path)
    cleanup.extend(names)
    assert names == [qa, qb]
    op_plugin.reference(qa)(lambda x: x + 1)
    assert op_plugin.load_yaml(path) == names

    path.write_text(path.read_text() + "\n# edited\n")
    with pytest.raises(op_plugin.YamlSpecError, match="changed since it was loaded") as info:
        op_plugin.load_yaml(path)
    err = info.value
    assert err.location.file == str(path)
    assert (err.location.line, err.location.op, err.location.field) == (3, qa.split("::")[1], "func")

    # The first registration is untouched and still works, eagerly and through the Meta function.
    x = torch.arange(4.0)
    torch.testing.assert_close(getattr(torch.ops.npu, qa.split("::")[1])(x), x + 1)
    out = getattr(torch.ops.npu, qb.split("::")[1])(torch.empty(2, 3, device="meta"), 5)
    assert out.shape == (5, 2, 3) and out.device.type == "meta"
    assert _registry.find(qa).spec.location.file == str(path)


def test_registration_failure_in_torch_library_registers_nothing(tmp_path, monkeypatch, cleanup):
    path, qa, qb = _good_file(tmp_path, "halfway")
    real = _library._register_op
    calls: list[str] = []

    def failing_register_op(lib, spec):
        calls.append(spec.qualname)
        if spec.qualname == qb:
            # By now the first op is really defined in the dispatcher; failing here must undo it.
            assert in_dispatcher(qa)
            raise RuntimeError("simulated torch.library failure")
        return real(lib, spec)

    monkeypatch.setattr(_library, "_register_op", failing_register_op)
    with pytest.raises(RuntimeError, match="simulated torch.library failure") as info:
        op_plugin.load_yaml(path)
    assert calls == [qa, qb]
    # `info` (still referenced below) keeps the failed call's frames, and so its torch.library.Library,
    # alive: the fragment must be destroyed explicitly, not merely dropped for the garbage collector.
    for q in (qa, qb):
        assert_not_registered(q)
    del info

    # Nothing was left half-registered: the same file loads cleanly once the failure is gone.
    monkeypatch.setattr(_library, "_register_op", real)
    cleanup.extend(op_plugin.load_yaml(path))
    assert in_dispatcher(qa) and in_dispatcher(qb)


def test_failing_load_hook_registers_nothing(tmp_path, monkeypatch, cleanup):
    """A failure after torch.library registration (e.g. attaching a GE converter) also undoes everything."""
    path, qa, qb = _good_file(tmp_path, "hook")
    undone: list[str] = []

    def hook(st):
        st.handles.add(RegistrationHandle(lambda: undone.append(st.qualname)))
        if st.qualname == qb:
            raise RuntimeError("simulated hook failure")

    monkeypatch.setattr(_load, "_load_hooks", [*_load._load_hooks, hook])
    with pytest.raises(RuntimeError, match="simulated hook failure") as info:
        op_plugin.load_yaml(path)
    assert sorted(undone) == sorted([qa, qb])
    for q in (qa, qb):  # `info` keeps the failed call's frames alive: destroyed explicitly, not by the GC
        assert_not_registered(q)
    del info


def test_python_tag_runs_nothing(tmp_path):
    """The safe loader refuses Python tags: the command in the file is never run."""
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.yaml"
    path.write_text(
        "namespace: npu\n"
        "ops:\n"
        "  - func: npu_yaml_errors_evil_a(Tensor x) -> Tensor\n"
        f"    doc: !!python/object/apply:os.system [\"touch {marker}\"]\n"
        "  - func: npu_yaml_errors_evil_b(Tensor x) -> Tensor\n"
        f"    doc: !!python/object/apply:os.system \"touch {marker}\"\n",
        encoding="utf-8",
    )
    with pytest.raises(op_plugin.YamlSpecError) as info:
        op_plugin.load_yaml(path)
    assert info.value.location.file == str(path)
    assert not marker.exists()
    for q in ("npu::npu_yaml_errors_evil_a", "npu::npu_yaml_errors_evil_b"):
        assert_not_registered(q)
