"""docs/ge-executor-ops.md lists exactly the GE op types the executor supports (generated page)."""
from pathlib import Path

from op_plugin._simulator.interpreter.kernels import builtin_op_types
from op_plugin._tools.oplist import REGENERATE, STRUCTURAL, render_page, shipped_custom_types

PAGE = Path(__file__).resolve().parents[1] / "docs" / "ge-executor-ops.md"


def test_page_matches_the_executor():
    expected = render_page()
    committed = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
    assert committed == expected, (
        f"{PAGE} is out of date with the GE executor's kernels; regenerate it with:\n    {REGENERATE}")


def test_page_lists_every_live_op_type():
    page = render_page()
    rows = {line.split("`")[1] for line in page.splitlines() if line.startswith("| `")}
    live = set(builtin_op_types())
    assert live <= rows
    assert {name for name, _ in STRUCTURAL} <= rows
    assert {t for t, _ in shipped_custom_types()} == {"NpuCustomScaledSoftmax", "NpuCustomKvCacheUpdate"}
    assert rows == live | {name for name, _ in STRUCTURAL} | {t for t, _ in shipped_custom_types()}
    assert f"{len(live)} built-in op types" in page
