"""`op-plugin test FILE.yaml [--python MODULE]...`: the `user_checks` on every op x sample of a
user's YAML file, with a progress bar, a summary table and a pass/fail outcome.

`run_yaml_checks` is the engine (also behind `op_plugin.testing.check_yaml_ops`); `summary_table`
and `failure_text` format its outcomes.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from ... import _registry
from ..._base.paths import shown, special_file
from ..._registry.fake_overrides import warn_replaced_fakes
from ..._registry.load import load_yaml, parse_yaml
from ..._spec.model import OpSpec
from .default_samples import NoDefaultSample, default_sample_case
from .error_text import clean_message, origin
from .oracles import GoldenCase, custom_type_note, golden_cases, has_oracle
from .._shared.progress import progress_bar
from .samples import SampleCase
from .checks import CHECKS, ORACLE_CHECKS, CheckSkipped


@dataclass
class CheckOutcome:
    case: str          # "<op>-<sample index>"
    op: str            # qualified op name
    check: str         # a CHECKS name
    status: str        # "pass", "fail", "skip", "error"
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.status in ("fail", "error")


_PRIVATE_PREFIX = "_op_plugin_user_file_"


def import_user_module(name: str) -> None:
    """Import MODULE (the working directory is importable) or a .py file path.

    A file is registered under a private module name made from its path (`_op_plugin_user_file_`
    and a hash), never under its stem: `json.py` or `copy.py` of the user's must not replace the
    standard module of that name for the rest of the run. A file is run each time it is given, as
    before (its decorators attach its pieces again after they were detached)."""
    if name.endswith(".py") or "/" in name:
        path = Path(name).resolve()
        kind = special_file(path)
        if kind is not None:  # a FIFO would block the import, a device never end it
            raise ImportError(f"{shown(name)}: the path is {kind}, not a regular file")
        digest = hashlib.sha256(str(path).encode("utf-8", "surrogateescape")).hexdigest()[:16]
        module_name = f"{_PRIVATE_PREFIX}{digest}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {name}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # dataclasses and pickle look the module up by name
        try:
            spec.loader.exec_module(module)
        except (SyntaxError, OSError) as exc:  # not Python source, a folder, gone: say which file
            sys.modules.pop(module_name, None)
            line = getattr(exc, "lineno", None) or 1
            raise ImportError(f"{shown(name)}:{line}: cannot import it: {type(exc).__name__}: "
                              f"{getattr(exc, 'msg', None) or getattr(exc, 'strerror', None) or exc}") from exc
        except BaseException:
            sys.modules.pop(module_name, None)
            raise
        return
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    importlib.import_module(name)


def yaml_cases(path: str | Path, python: tuple[str, ...] | list[str] = (),
               problems: list[tuple[OpSpec, str]] | None = None) -> list:
    """Import the user's Python pieces, load the YAML file unless they already did, and return its
    op x sample cases: the YAML's `samples:`, a sample derived from the schema for an op that
    declares none (`<op>-default`; when none can be derived, `(spec, reason)` is appended to
    `problems`), and the op's golden cases (`<op>-golden<i>`)."""
    for module in python:
        import_user_module(module)
    specs = parse_yaml(path)
    if not all(_registry.find(spec.qualname) is not None and _registry.find(spec.qualname).spec is not None
               for spec in specs):
        load_yaml(path)
    cases = []
    for spec in specs:
        st = _registry.find(spec.qualname)
        cases.extend(SampleCase(st.spec, i, sample) for i, sample in enumerate(st.spec.samples))
        if not st.spec.samples:
            try:
                cases.append(default_sample_case(st.spec))
            except NoDefaultSample as reason:
                if problems is not None:
                    problems.append((st.spec, str(reason)))
        cases.extend(golden_cases(st.spec))
    return cases


def run_case_checks(case: SampleCase, checks: tuple[str, ...] | list[str] | None = None,
                    no_grad: bool = False) -> list[CheckOutcome]:
    outcomes = []
    for name in checks or CHECKS:
        if isinstance(case, GoldenCase) != (name == "golden"):
            continue  # a golden case has the golden check only, and the golden check only golden cases
        check = CHECKS[name]
        try:
            with torch.set_grad_enabled(not no_grad and torch.is_grad_enabled()):
                detail = check(case)
            outcomes.append(CheckOutcome(case.id, case.spec.qualname, name, "pass", detail))
        except CheckSkipped as skipped:
            outcomes.append(CheckOutcome(case.id, case.spec.qualname, name, "skip", str(skipped)))
        except AssertionError as failure:
            outcomes.append(CheckOutcome(case.id, case.spec.qualname, name, "fail", str(failure).strip()))
        except Exception as error:  # one broken case must not stop the run
            outcomes.append(CheckOutcome(case.id, case.spec.qualname, name, "error", error_detail(error)))
    return outcomes


def default_checks(cases) -> list[str]:
    """Every check, but the oracle ones only when an op of the file has an oracle or golden values."""
    wanted = any(has_oracle(case.spec.qualname) for case in cases)
    return [name for name in CHECKS if wanted or name not in ORACLE_CHECKS]


def run_yaml_checks(path, python=(), checks=None, ops=None, no_grad: bool = False) -> list[CheckOutcome]:
    """Every check on every op x sample of the YAML file (`ops`: only these op names); `no_grad`:
    inference only (no input requires grad, no backward check), as `op-plugin test --no-grad`."""
    problems: list[tuple[OpSpec, str]] = []
    wanted = lambda spec: not ops or spec.name in ops or spec.qualname in ops  # noqa: E731
    cases = [c for c in yaml_cases(path, python, problems) if wanted(c.spec)]
    names = list(checks or default_checks(cases))
    outcomes: list[CheckOutcome] = [
        CheckOutcome(f"{spec.name}-default", spec.qualname, names[0], "error",
                     f"no `samples:` and none derived from the schema: {reason}; declare `samples:` for this op")
        for spec, reason in problems if wanted(spec)]
    warn_replaced_fakes()
    with progress_bar(len(cases) * len(names), desc="op-plugin test", unit="check") as bar:
        for case in cases:
            for name in names:
                bar.set_postfix_str(f"{case.id} {name}")
                outcomes += run_case_checks(case, [name], no_grad=no_grad)
                bar.update(1)
    return outcomes


def error_detail(error: BaseException) -> str:
    """One paragraph for an unexpected error: its type and message without the tracebacks and
    log lines TorchAir and dynamo append, and where it was raised."""
    where = origin(error)
    return clean_message(error) + (f" ({where})" if where else "")


def notes(outcomes: list[CheckOutcome]) -> list[str]:
    """What the table cannot say: for each op on a custom GE type without an oracle, what its
    npugraph == eager proves."""
    result = []
    for qualname in dict.fromkeys(o.op for o in outcomes):
        st = _registry.find(qualname)
        note = custom_type_note(st.spec) if st is not None and st.spec is not None else None
        if note:
            result.append(f"note: {st.name}: {note}")
    return result


_MARK = {"pass": "ok", "fail": "FAIL", "skip": "-", "error": "ERROR"}


def summary_table(outcomes: list[CheckOutcome]) -> str:
    checks = list(dict.fromkeys(o.check for o in outcomes))
    cases = list(dict.fromkeys(o.case for o in outcomes))
    cell = {(o.case, o.check): _MARK[o.status] for o in outcomes}
    rows = [["op x sample", *checks]] + [[case, *(cell.get((case, c), "") for c in checks)] for case in cases]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    counts = {s: sum(o.status == s for o in outcomes) for s in _MARK}
    lines.append(f"\n{counts['pass']} passed, {counts['fail']} failed, {counts['error']} errors, "
                 f"{counts['skip']} skipped ({len(cases)} op x sample cases)")
    return "\n".join(lines)


def failure_text(outcomes: list[CheckOutcome]) -> str:
    return "\n".join(f"{o.status.upper()} {o.case} [{o.check}]: {o.detail}" for o in outcomes if o.failed)
