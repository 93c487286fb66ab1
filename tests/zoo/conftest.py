"""The zoo tier runs only where its extra is installed (`pip install -e .[zoo]`): transformers."""
import pytest

pytest.importorskip("transformers", reason="the zoo extra is not installed (pip install -e .[zoo])")
