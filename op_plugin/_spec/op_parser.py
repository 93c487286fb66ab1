"""The context of one `ops:` entry while it is validated: where it is, and how to fail there."""
from __future__ import annotations

import re

from .._base.errors import YamlSpecError
from .yaml_source import LocatedDocument

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class OpParser:
    """Parses one `ops:` entry; `fail` builds errors that carry the op and field."""

    def __init__(self, doc: LocatedDocument, path: tuple, op_name: str | None):
        self.doc, self.path, self.op = doc, path, op_name

    def fail(self, sub: tuple, field: str, message: str) -> YamlSpecError:
        return YamlSpecError(self.doc.location(self.path + sub, self.op, field), message)
