"""docs/aten-ops-without-converter.md lists exactly the aten ops an npugraph graph can hold that TorchAir
does not lower, each with op_plugin's converter or the reason it is not lowered (generated page)."""
import subprocess
import sys
from pathlib import Path

import torch

from op_plugin._tools.aten_gaps import REGENERATE, gaps, graph_ops, reason

PAGE = Path(__file__).resolve().parents[1] / "docs" / "aten-ops-without-converter.md"


def test_page_matches_the_code():
    """In a fresh process, as the regeneration command runs: the set depends on which modules registered
    Python decompositions, which other tests in this worker may have imported."""
    committed = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
    fresh = subprocess.run([sys.executable, "-m", "op_plugin._tools.aten_gaps"], capture_output=True, text=True,
                           timeout=300, check=True).stdout
    assert committed == fresh, (
        f"{PAGE} is out of date with TorchAir's and op_plugin's converters; regenerate it with:\n    {REGENERATE}")


def test_every_row_has_a_converter_or_a_reason():
    rows = gaps()
    assert rows
    assert all(bool(g.converter) != bool(g.reason) for g in rows)
    lowered = {g.op for g in rows if g.converter}
    # issue 27's ops are among op_plugin's rows, not among the reasons
    for op in ("aten.reflection_pad1d.default", "aten.pixel_shuffle.default", "aten.softplus_backward.default",
               "aten._foreach_neg.default", "aten.index_copy.default"):
        assert op in lowered


def test_the_set_is_what_tracing_leaves():
    names = {str(op) for op in graph_ops()}
    assert "aten.reflection_pad1d.default" in names         # core, with a CPU kernel
    assert "aten.pixel_shuffle.default" in names            # not core: TorchAir applies no core decomposition
    assert "aten.upsample_nearest1d.vec" not in names       # CompositeImplicitAutograd: decomposed while tracing
    assert "aten.add_.Tensor" not in names                  # mutable: functionalization replaces it
    assert "aten.add.out" not in names


def test_reasons_follow_the_ops_definition():
    assert reason(torch.ops.aten.nonzero.default).startswith("output shape depends on the data")
    assert reason(torch.ops.aten.permute_copy.default).startswith("the `_copy` form of a view")
    assert reason(torch.ops.aten.poisson.default).startswith("random sampling")
