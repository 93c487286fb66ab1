"""The error types users see.

Every error that comes from a YAML file carries where it came from (file, line, op, field) so
the message alone is enough to find and fix the problem.
"""
from __future__ import annotations

from dataclasses import dataclass


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
        """`file:line`, as compilers and editors read it."""
        return f"{self.file}:{self.line}"

    def __str__(self) -> str:
        parts = [self.file_line]
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
