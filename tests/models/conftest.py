"""tests/models compile the example models of examples/ (a package at the repository root, which
.venv/bin/pytest does not put on sys.path; `python -m pytest` from the root has it already)."""
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
