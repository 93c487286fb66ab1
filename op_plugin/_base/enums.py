"""`StrEnum`: kinds that cross modules as enums, yet read as their plain string everywhere."""
from __future__ import annotations

import enum


class StrEnum(str, enum.Enum):
    """Members equal, print, format and JSON-encode as their value (like Python 3.11's enum.StrEnum,
    which this project does not require), so an enum can go where TorchAir or a message expects text."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)
