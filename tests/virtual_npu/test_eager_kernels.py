"""Eager aten ops on npu tensors running the GE kernel a graph runs (op_plugin/_simulator/device/ge_eager.py):
the oracle is `ge_op(type)` on the same values, or the single-op npugraph graph on CPU tensors."""
from __future__ import annotations

from .test_device import _ok, built_extension  # noqa: F401  (the module fixture builds the C++ part)


def test_fp16_matmul_accumulates_in_float32_as_the_cube_unit(tmp_path):
    _ok("""
        import torch
        from op_plugin._simulator.interpreter.calls import ge_op
        torch.manual_seed(0)
        a, b = torch.randn(64, 512).half(), torch.randn(512, 48).half()
        out = torch.mm(a.npu(), b.npu())
        assert out.device.type == "npu" and out.dtype == torch.float16
        assert torch.equal(out.cpu(), ge_op("MatMul")(a, b, None))
        assert torch.equal(out.cpu(), (a.float() @ b.float()).half())      # float32 accumulation, one rounding
        x, y = torch.randn(3, 16, 64).half(), torch.randn(3, 64, 8).half()
        assert torch.equal(torch.bmm(x.npu(), y.npu()).cpu(), (x.float() @ y.float()).half())
        assert torch.equal((x.npu() @ y.npu()).cpu(), ge_op("BatchMatMul")(x, y))  # matmul reaches the device as bmm
        i = torch.arange(6, dtype=torch.int32).reshape(2, 3)             # not a GE kernel's: the CPU kernel
        assert torch.equal(torch.mm(i.npu(), i.t().npu()).cpu(), i @ i.t())
    """, tmp_path)


def test_single_op_graphs_equal_eager_bit_for_bit(tmp_path):
    out = _ok("""
        import torch, op_plugin  # noqa: F401
        F = torch.nn.functional
        torch.manual_seed(0)
        cases = {
            "softmax": (lambda x: torch.softmax(x, dim=-1), ()),
            "softmax_f32": (lambda x: torch.softmax(x.float(), dim=1), ()),
            "layer_norm": (lambda x, w, b: F.layer_norm(x, (64,), w, b, eps=1e-5), ("w", "b")),
            "layer_norm_no_affine": (lambda x: F.layer_norm(x, (64,)), ()),
            "gelu": (lambda x: F.gelu(x), ()),
            "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), ()),
            "mm": (lambda x, w: x.reshape(-1, 64) @ w, ("m",)),
        }
        for dtype in (torch.float16, torch.float32):
            x = torch.randn(4, 8, 64).to(dtype)
            extra = {"w": torch.randn(64).to(dtype), "b": torch.randn(64).to(dtype), "m": torch.randn(64, 16).to(dtype)}
            for name, (fn, names) in cases.items():
                inputs = [x] + [extra[n] for n in names]
                torch._dynamo.reset()
                graph = torch.compile(fn, backend="npugraph", dynamic=False)(*inputs)
                eager = fn(*[t.npu() for t in inputs])
                assert eager.device.type == "npu", name
                assert torch.equal(eager.cpu(), graph), (name, dtype, (eager.cpu().float() - graph.float()).abs().max())
                print(name, dtype, "equal")
    """, tmp_path)
    assert out.count("equal") == 14


def test_backward_through_the_ge_kernels(tmp_path):
    _ok("""
        import torch
        F = torch.nn.functional
        torch.manual_seed(0)
        x = torch.randn(8, 32)
        xn = x.clone().npu().requires_grad_()
        F.gelu(F.layer_norm(xn, (32,))).sum().backward()
        xc = x.clone().requires_grad_()
        F.gelu(F.layer_norm(xc, (32,))).sum().backward()
        assert xn.grad.device.type == "npu"
        assert torch.allclose(xn.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-6)  # GeluGradV2: the erf form's derivative
    """, tmp_path)
