"""The error types users see.

Every error that comes from a YAML file carries where it came from (file, line, op, field) so
the message alone is enough to find and fix the problem.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from .paths import shown


class OpPluginError(RuntimeError):
    """Base class of every error op_plugin raises on purpose."""


@dataclass(frozen=True)
class Location:
    """A place in a YAML file: the file, the 1-based line, the op and the field."""

    file: str
    line: int
    op: str | None = None
    field: str | None = None

    def with_field(self, field: str, line: int | None = None) -> "Location":
        return Location(self.file, self.line if line is None else line, self.op, field)

    @property
    def file_line(self) -> str:
        """`file:line`, as compilers and editors read it (the name as it is: generated text escapes it its way)."""
        return f"{self.file}:{self.line}"

    def __str__(self) -> str:
        """`file:line: op '...': field '...'`, the start of a message (control characters in the name escaped)."""
        return self.text(escaped=True)

    def text(self, escaped: bool = True) -> str:
        """`file:line: op '...': field '...'`; with `escaped=False` the file name as it is (for generated
        text that escapes it its own way)."""
        parts = [f"{shown(self.file) if escaped else self.file}:{self.line}"]
        if self.op:
            parts.append(f"op '{self.op}'")
        if self.field:
            parts.append(f"field '{self.field}'")
        return ": ".join(parts)


class YamlSpecError(OpPluginError, ValueError):
    """A YAML operator definition is invalid. Nothing from its file was registered."""

    def __init__(self, location: Location, message: str):
        self.location = location
        self.reason = message
        super().__init__(f"{location}: {message}")


class MissingImplementationError(OpPluginError, NotImplementedError):
    """An op was used before the piece it needs (reference kernel, Meta function, ...) exists."""


class NoBackwardError(OpPluginError):
    """Autograd reached an op that has no backward: none written yet (`MissingBackwardError`), or an
    in-place op, which has no gradient. The forward works under torch.no_grad() (inference)."""


class MissingBackwardError(MissingImplementationError, NoBackwardError):
    """A functional op without `@op_plugin.backward` was differentiated."""


# How the user gives options, where an error or note names a fix: keywords in Python (the default),
# flags on the `op-plugin` command line (`op_plugin.cli` sets it around a command), and the options the
# running tool does not have (`op_plugin.compare` checks the GE graph: it has no `mode`).
_OPTION_FORM: ContextVar[tuple[str, frozenset]] = ContextVar("op_plugin_option_form",
                                                             default=("python", frozenset()))


@contextlib.contextmanager
def options_given_as(form: str | None = None, without: Iterable[str] = ()) -> Iterator[None]:
    """Inside the block, `option_fix` spells options as `form` gives them ("python" or "cli"; None keeps
    the current one), and offers none of `without`."""
    current, lacking = _OPTION_FORM.get()
    token = _OPTION_FORM.set((form or current, lacking | frozenset(without)))
    try:
        yield
    finally:
        _OPTION_FORM.reset(token)


def option_fix(name: str, value: object = True) -> str | None:
    """Option `name` set to `value` as the user gives it here: `no_grad=True`, `mode='aclgraph'` in
    Python; `--no-grad`, `--mode aclgraph` on the command line; None where the running tool lacks it."""
    form, lacking = _OPTION_FORM.get()
    if name in lacking:
        return None
    if form != "cli":
        return f"{name}={value!r}"
    flag = "--" + name.replace("_", "-")
    if value is True:
        return flag
    if value is False:
        return f"--no-{name.replace('_', '-')}"
    return f"{flag} {value}"
