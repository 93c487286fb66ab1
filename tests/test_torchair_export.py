"""torchair.dynamo_export on a CPU host: the .air file is CANN GE's serialization (ge::Graph::SaveToFile), which
this host cannot make; the refusal says so and names what TorchAir wrote before it (the GE graph as text)."""
import pytest
import torch

import op_plugin
from op_plugin._simulator.hosting.native_stub import ExportNeedsCann


class _Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


def test_dynamo_export_is_refused_by_name_after_writing_the_graph_text(tmp_path, monkeypatch):
    torchair = op_plugin.load_torchair()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ExportNeedsCann, match=r"\.air file .* CANN's GE .*dynamo\.pbtxt"):
        torchair.dynamo_export(torch.randn(2, 3), model=_Model(), export_path="out")
    graph_text = (tmp_path / "out" / "dynamo.pbtxt").read_text()
    assert 'op: "Relu"' in graph_text and 'op: "Mul"' in graph_text
