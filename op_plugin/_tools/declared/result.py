"""One declared case's outcome: its class (pass, numeric, kernel-error, ...), reason and figures."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CaseResult:
    case_id: str
    cls: str
    reason: str = ""
    ge_type: str | None = None  # missing-kernel / kernel-error: the GE op type at fault
    max_abs_err: float | None = None  # numeric: the largest error, and the tolerance it broke
    tolerance: dict | None = None
    ge_graphs: int = 0  # GE graphs loaded by the compiled run (0: nothing reached the GE executor)
    ge_types: list = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}
