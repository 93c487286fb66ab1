"""The C++ boxed fallback (op_plugin/_simulator/device/csrc/cpu_fallback.cpp): every aten op without a kernel
of its own runs its CPU kernel on the npu tensors' memory. The oracle is the same call on CPU tensors; aliasing
is checked through memory (a write through a view shows in its base)."""
from __future__ import annotations

from .test_device import _ok, built_extension  # noqa: F401  (the module fixture builds the C++ part)


def test_argument_shapes_and_results_as_on_cpu(tmp_path):
    _ok("""
        import torch
        torch.manual_seed(0)
        a, b = torch.randn(3, 4), torch.randn(3, 4)
        na, nb = a.npu(), b.npu()
        # out= that must grow (a CPU view of npu memory cannot): resized on the npu side, then written
        out = torch.empty(0, device="npu")
        r = torch.add(na, nb, out=out)
        assert r is out and out.shape == (3, 4) and torch.equal(out.cpu(), a + b)
        # out= of the right shape, two outs (aminmax)
        lo, hi = torch.empty(4, device="npu"), torch.empty(4, device="npu")
        torch.aminmax(na, dim=0, out=(lo, hi))
        ref = torch.aminmax(a, dim=0)
        assert torch.equal(lo.cpu(), ref.min) and torch.equal(hi.cpu(), ref.max)
        # in-place ops that change metadata act on the npu tensor itself
        x = na.clone()
        assert x.unsqueeze_(0) is x and x.shape == (1, 3, 4)
        x.transpose_(1, 2)
        assert x.shape == (1, 4, 3) and torch.equal(x.cpu(), a.unsqueeze(0).transpose(1, 2))
        # tensor lists in (cat, stack) and out (chunk: views of the input's memory)
        assert torch.equal(torch.cat([na, nb], 1).cpu(), torch.cat([a, b], 1))
        parts = torch.chunk(na.clone(), 2, dim=1)
        parts[0].fill_(7)
        assert parts[0].device.type == "npu" and parts[0]._base is not None
        # List[Optional[Tensor]] (index) with npu and with CPU indices, index_put_ with a CPU index
        i = torch.tensor([2, 0])
        assert torch.equal(na[i.npu()].cpu(), a[i]) and torch.equal(na[i].cpu(), a[i])
        y = na.clone()
        y[i] = 0.5
        z = a.clone(); z[i] = 0.5
        assert torch.equal(y.cpu(), z)
        # factories with an npu device argument, and the device index they name
        assert torch.arange(5, device="npu:2").device == torch.device("npu", 2)
        assert torch.full((2,), 3.0, device="npu:1").device.index == 1
        # a 0-dim CPU tensor is a scalar: accepted beside npu tensors
        assert torch.equal((na * torch.tensor(2.0)).cpu(), a * 2)
        print("ok")
    """, tmp_path)


def test_mixed_devices_are_refused_as_on_a_real_device(tmp_path):
    out = _ok("""
        import torch
        for call in (lambda: torch.ones(2, device="npu") + torch.ones(2),
                     lambda: torch.ones(2, device="npu:0") * torch.ones(2, device="npu:1"),
                     lambda: torch.where(torch.ones(2, device="npu") > 0, torch.ones(2, device="npu"), torch.ones(2))):
            try:
                call()
            except RuntimeError as error:
                assert "Expected all tensors to be on the same device" in str(error), error
                print(str(error).split("devices, ")[1].split("!")[0].replace(" ", ""))
            else:
                raise AssertionError("mixed devices accepted")
    """, tmp_path)
    assert out.split() == ["npu:0andcpu", "npu:0andnpu:1", "npu:0andcpu"]


def test_views_share_the_npu_memory_and_count_once(tmp_path):
    _ok("""
        import torch
        base = torch.zeros(4, 4, device="npu")
        before = torch.npu.memory_allocated()
        row = base.select(0, 1)          # a view through the fallback
        diag = base.diagonal()
        assert torch.npu.memory_allocated() == before   # views allocate nothing
        row.add_(1)
        diag.mul_(3)
        expected = torch.zeros(4, 4); expected[1] += 1; expected.diagonal().mul_(3)
        assert torch.equal(base.cpu(), expected)
    """, tmp_path)
