"""Reports over declared-case results: the summary, the known-failures file and its check, the page.

The known-failures file (tests/data/declared_cases_known_failures.txt) has one failing case per
line: `<case id> <class> <reason>` (whitespace-separated; the reason runs to the end of the line;
`#` starts a comment). The check fails on a failing case that is not listed (a regression) and
warns about listed cases that now pass (stale: delete the line), so the list can only shrink. A case
declared on an npu converter that eager cannot run on the CPU host counts as failing too (the simulator
lacks its CPU kernel, or TorchAir's case is outside CANN's contract): it is listed as `eager-unsupported`
with its reason.

A listed case may instead carry the verdict `invalid-case`: TorchAir's case is outside the op's contract on
every host (the reason cites the source: CANN's doc, the schema, a TorchAir converter that raises on it), so
it fails here in whatever class and would fail on an Ascend host too. Such cases stay in the npu rate over
all cases and are left out of the rate over valid cases; both rates are reported. A case listed as
`invalid-case` that passes is reported (the simulator accepted what CANN refuses, or the verdict is wrong).
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path

from .cases import CLASSES, FAILING, CaseResult
from .._shared.progress import progress_bar

REGENERATE = ("op-plugin declared-cases --workers 2 --json declared-cases.json "
              "--markdown docs/declared-cases.md --write-known tests/data/declared_cases_known_failures.txt --force")


INVALID = "invalid-case"  # a known-failures verdict, not a result class (see the module docstring)


def summarize(results: list[CaseResult], known: dict | None = None) -> dict:
    """known: the known-failures entries; their `invalid-case` verdicts shape the npu rate over valid cases."""
    counts = collections.Counter(r.cls for r in results)
    runnable = len(results) - counts["eager-unsupported"]
    missing = collections.Counter(r.ge_type for r in results if r.cls == "missing-kernel")
    kernel_errors = collections.Counter(r.ge_type or "?" for r in results if r.cls == "kernel-error")
    return {
        "cases": len(results),
        "eager_runnable": runnable,
        "passed": counts["pass"],
        "pass_rate": round(counts["pass"] / runnable, 4) if runnable else None,
        "by_class": {cls: counts[cls] for cls in CLASSES if counts[cls]},
        "missing_ge_types": dict(missing.most_common()),
        "kernel_error_ge_types": dict(kernel_errors.most_common()),
        "passed_without_ge_graph": sum(1 for r in results if r.cls == "pass" and not r.ge_graphs),
        "npu": _npu_summary(results, known or {}),
    }


NPU_PREFIX = "npu."  # the ids of the cases declared on TorchAir's converters of torch_npu's ops


def _npu_summary(results: list[CaseResult], known: dict) -> dict:
    """The cases of the npu converters (torch_npu's ops). pass_rate is over ALL of them, since an npu op
    that cannot run eagerly on the CPU host is the simulator's gap (no CPU kernel), not the CPU's.
    valid_pass_rate leaves out the cases invalid on every host (known `invalid-case` verdicts, still failing)
    and those too large for this host; both figures are reported."""
    npu = [r for r in results if r.case_id.startswith(NPU_PREFIX)]
    counts = collections.Counter(r.cls for r in npu)
    invalid = sorted(r.case_id for r in npu if _is_invalid(r, known))
    valid = len(npu) - len(invalid) - counts["too-large"]
    return {
        "cases": len(npu),
        "passed": counts["pass"],
        "pass_rate": round(counts["pass"] / len(npu), 4) if npu else None,
        "by_class": {cls: counts[cls] for cls in CLASSES if counts[cls]},
        "invalid_cases": invalid,
        "too_large": counts["too-large"],
        "valid": valid,
        "valid_pass_rate": round(counts["pass"] / valid, 4) if valid > 0 else None,
    }


def _is_invalid(result: CaseResult, known: dict) -> bool:
    entry = known.get(result.case_id)
    return entry is not None and entry.cls == INVALID and result.cls != "pass"


def summary_text(summary: dict, top: int = 15) -> str:
    rate = "n/a" if summary["pass_rate"] is None else f"{100 * summary['pass_rate']:.1f}%"
    lines = [f"{summary['passed']} of {summary['eager_runnable']} eager-runnable declared cases pass ({rate}); "
             f"{summary['cases']} cases in all"]
    lines += [f"  {cls:18} {count}" for cls, count in summary["by_class"].items()]
    npu = summary.get("npu") or {}
    if npu.get("cases"):
        classes = ", ".join(f"{cls} {count}" for cls, count in npu["by_class"].items())
        lines.append(f"npu converters (torch_npu's ops): {npu['passed']} of {npu['cases']} cases pass "
                     f"({100 * npu['pass_rate']:.1f}%, eager-unsupported counted as failing): {classes}")
        if npu.get("valid_pass_rate") is not None and (npu["invalid_cases"] or npu["too_large"]):
            lines.append(f"  of the {npu['valid']} valid cases that fit this host ({len(npu['invalid_cases'])} "
                         f"invalid on every host, {npu['too_large']} too large): {npu['passed']} pass "
                         f"({100 * npu['valid_pass_rate']:.1f}%)")
    if summary["passed_without_ge_graph"]:
        lines.append(f"  ({summary['passed_without_ge_graph']} of the passes reached no GE graph: "
                     "dynamo ran them in Python)")
    missing = list(summary["missing_ge_types"].items())
    if missing:
        shown = ", ".join(f"{t} {n}" for t, n in missing[:top])
        more = f", and {len(missing) - top} more types" if len(missing) > top else ""
        lines.append(f"missing GE kernels by case count: {shown}{more}")
    return "\n".join(lines)


@dataclass
class KnownFailure:
    case_id: str
    cls: str
    reason: str


def counts_as_failing(result: CaseResult) -> bool:
    """Failing for the check and the file: a failing class, or an npu case eager cannot run (see _npu_summary)."""
    return result.cls in FAILING or (result.cls == "eager-unsupported" and result.case_id.startswith(NPU_PREFIX))


_LISTABLE = (*FAILING, "eager-unsupported", INVALID)


def read_known(path) -> dict[str, KnownFailure]:
    known = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}:1: a known-failures file is UTF-8 text: {exc.reason}") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the known-failures file: {exc.strerror or exc}") from None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 2 or parts[1] not in _LISTABLE:
            raise ValueError(f"{path}:{number}: expected '<case id> <class> <reason>' with a class among "
                             f"{', '.join(_LISTABLE)}, got {raw!r}")
        known[parts[0]] = KnownFailure(parts[0], parts[1], parts[2] if len(parts) > 2 else "")
    return known


def write_known(path, results: list[CaseResult], previous: dict[str, KnownFailure] | None = None,
                keep_unrun: bool = False) -> int:
    """Write the failing results as a known-failures file; returns the count of entries.

    previous: the file's entries before; a case failing in the same class keeps its reason (a
    reason written by hand, such as why a difference is by design, survives regeneration).
    keep_unrun: also keep the previous entries of cases not run this time (a --prefix run).
    """
    previous = previous or {}
    entries = dict(previous) if keep_unrun else {}
    for result in results:
        entries.pop(result.case_id, None)
        if counts_as_failing(result):
            old = previous.get(result.case_id)
            if old is not None and old.cls == INVALID:  # a verdict written by hand: kept while the case fails
                entries[result.case_id] = old
                continue
            reason = old.reason if old is not None and old.cls == result.cls and old.reason else _reason(result)
            entries[result.case_id] = KnownFailure(result.case_id, result.cls, reason)
    header = ["# Declared TorchAir cases known to fail on the CPU simulator: <case id> <class> <reason>.",
              "# `op-plugin declared-cases --check` fails on any other failing case; "
              "delete a line once its case passes.",
              "# A reason edited by hand is kept by --write-known while the case fails in the same class.",
              f"# Class {INVALID}: TorchAir's case is outside the op's contract on every host (reason cites the "
              "source); kept while it fails in any class, left out of the npu rate over valid cases.",
              f"# Regenerate: {REGENERATE}"]
    body = [f"{e.case_id} {e.cls} {e.reason}".rstrip() for e in sorted(entries.values(), key=lambda e: e.case_id)]
    Path(path).write_text("\n".join(header + body) + "\n", encoding="utf-8")
    return len(body)


@dataclass
class CheckOutcome:
    regressions: list[CaseResult] = field(default_factory=list)
    stale: list[KnownFailure] = field(default_factory=list)  # listed, now passing (or eager-unsupported)
    changed: list[tuple[KnownFailure, CaseResult]] = field(default_factory=list)  # still failing, another class
    unknown: list[KnownFailure] = field(default_factory=list)  # listed, but no such case was run

    @property
    def ok(self) -> bool:
        return not self.regressions

    def text(self) -> str:
        lines = [f"REGRESSION {r.case_id}: {r.cls}: {_reason(r)}" for r in self.regressions]
        lines += [f"warning: {k.case_id} now passes; delete it from the known-failures file (stale entry)"
                  + (f" (listed {INVALID}: the simulator accepts what the verdict says every host refuses; "
                     "check which is wrong)" if k.cls == INVALID else "")
                  for k in self.stale]
        lines += [f"note: {k.case_id} was {k.cls}, now {r.cls}: {_reason(r)}" for k, r in self.changed]
        lines += [f"warning: {k.case_id} is listed as a known failure but was not run (no such case?)"
                  for k in self.unknown]
        verdict = ("check passed: no failing case outside the known-failures file" if self.ok else
                   f"check FAILED: {len(self.regressions)} failing case(s) not in the known-failures file")
        return "\n".join(lines + [verdict])


def check_known(results: list[CaseResult], known: dict[str, KnownFailure], all_cases_ran: bool) -> CheckOutcome:
    outcome = CheckOutcome()
    ran = {r.case_id: r for r in results}
    for result in results:
        entry = known.get(result.case_id)
        if counts_as_failing(result) and entry is None:
            outcome.regressions.append(result)
        elif entry is not None and not counts_as_failing(result):
            outcome.stale.append(entry)
        elif entry is not None and entry.cls not in (result.cls, INVALID):
            outcome.changed.append((entry, result))
    if all_cases_ran:
        outcome.unknown = [k for k in known.values() if k.case_id not in ran]
    return outcome


def _reason(result: CaseResult) -> str:
    return " ".join(result.reason.split()) or result.cls


def _note(result: CaseResult, known: dict[str, KnownFailure]) -> str:
    entry = known.get(result.case_id)
    same = entry is not None and entry.cls in (result.cls, INVALID)
    return entry.reason if same and entry.reason != _reason(result) else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_page(results: list[CaseResult], summary: dict, known: dict[str, KnownFailure] | None = None) -> str:
    """The markdown page; `known` adds the known-failures file's hand-written reasons as notes."""
    known = known or {}
    rate = "n/a" if summary["pass_rate"] is None else f"{100 * summary['pass_rate']:.1f}%"
    out = ["# TorchAir's declared cases on the CPU simulator", "",
           "Generated by the declared-cases tool; do not edit by hand. "
           "Regenerate (a full run takes a few minutes with 2 workers):", "",
           f"    {REGENERATE}", "",
           "Every case TorchAir declares on its converters (`@declare_supported`) runs through "
           "`torch.compile(backend=\"npugraph\")` and eagerly on the CPU, each in a guarded worker process "
           "(`op_plugin/_tools/declared/cases.py`). Cases that eager itself cannot run on a CPU are not counted.", "",
           "## Summary", "",
           f"**{summary['passed']} of {summary['eager_runnable']} eager-runnable cases pass ({rate})**; "
           f"{summary['cases']} declared cases in all.", ""]
    npu = summary.get("npu") or {}
    if npu.get("cases"):
        out += [f"Of them, the {npu['cases']} cases declared on the converters of torch_npu's ops (`npu.*`): "
                f"**{npu['passed']} pass ({100 * npu['pass_rate']:.1f}% of all of them**; an npu op that cannot run "
                "eagerly on the CPU host counts as failing here: the simulator lacks its CPU kernel).", ""]
        if npu.get("valid_pass_rate") is not None and (npu["invalid_cases"] or npu["too_large"]):
            out += [f"Of the {npu['valid']} npu cases that are valid and fit this host, **{npu['passed']} pass "
                    f"({100 * npu['valid_pass_rate']:.1f}%)**. Left out: {npu['too_large']} too large for this "
                    f"host, and {len(npu['invalid_cases'])} invalid on every host (the known-failures verdict "
                    f"`{INVALID}`, each with its source): "
                    + ", ".join(f"`{c}`" for c in npu["invalid_cases"]) + ".", ""]
    out += ["| class | cases |", "|---|---|"]
    out += [f"| {cls} | {count} |" for cls, count in summary["by_class"].items()]
    if summary["missing_ge_types"]:
        out += ["", "## GE types without a CPU kernel, by case count", "", "| GE type | cases |", "|---|---|"]
        out += [f"| {t} | {n} |" for t, n in summary["missing_ge_types"].items()]
    failing = [r for r in results if r.cls in FAILING]
    out += ["", f"## Every non-passing case ({len(failing)})", "",
            "| case | class | reason | note |", "|---|---|---|---|"]
    out += [f"| `{r.case_id}` | {r.cls} | {_cell(_reason(r))} | {_cell(_note(r, known))} |" for r in failing]
    skipped = [r for r in results if r.cls == "eager-unsupported"]
    if skipped:
        out += ["", f"## Not counted: eager fails on the CPU ({len(skipped)})", "",
                "The `npu.*` ones count as failing in the npu converters' rate; the note says why eager fails.", "",
                "| case | eager's error | note |", "|---|---|---|"]
        out += [f"| `{r.case_id}` | {_cell(_reason(r))} | {_cell(_note(r, known))} |" for r in skipped]
    return "\n".join(out) + "\n"


class Progress:
    """The run's progress bar (`_tools/_shared/progress.py`: on a terminal only), advanced per finished case."""

    def __init__(self, total: int):
        self._bar = progress_bar(total, desc="declared cases", unit="case")

    def __enter__(self):
        self._bar.__enter__()
        return self

    def __exit__(self, *exc):
        self._bar.__exit__(*exc)

    def advance(self, result: CaseResult) -> None:
        self._bar.update(1)
        self._bar.set_postfix_str(f"{result.case_id}: {result.cls}")
