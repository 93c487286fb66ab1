"""Eager aten ops on npu tensors running the GE kernel a graph runs (op_plugin/_simulator/device/ge_eager.py):
the oracle is `ge_op(type)` on the same values, or the single-op npugraph graph on CPU tensors."""
from __future__ import annotations

import textwrap

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


# The ops added to GE_KERNELS with linear, softmax/log_softmax and layer norm training: name -> (aten call,
# inputs by dtype). Each case is one the adapter takes (the others are declined: next test).
_NEW_OPS = '''
import torch, op_plugin  # noqa: F401
aten = torch.ops.aten
torch.manual_seed(0)

def inputs(dtype):
    x, w = torch.randn(64, 512).to(dtype), torch.randn(512, 48).to(dtype)
    g = torch.randn(16, 256).to(dtype)
    sm = torch.softmax(torch.randn(16, 256), -1).to(dtype)
    ls = torch.log_softmax(torch.randn(16, 256), -1).to(dtype)
    xn, wn, bn = torch.randn(4, 6, 32).to(dtype), torch.randn(32).to(dtype), torch.randn(32).to(dtype)
    _, mean, rstd = aten.native_layer_norm(xn, [32], wn, bn, 1e-5)
    gn = torch.randn(4, 6, 32).to(dtype)
    cases = {
        "_softmax_backward_data": (lambda g, o: aten._softmax_backward_data(g, o, -1, o.dtype), (g, sm)),
        "_log_softmax": (lambda x: aten._log_softmax(x, 1, False), (g,)),
        "_log_softmax_backward_data": (lambda g, o: aten._log_softmax_backward_data(g, o, -1, o.dtype), (g, ls)),
        "native_layer_norm_backward": (lambda g, x, m, r, w, b: aten.native_layer_norm_backward(
            g, x, [32], m, r, w, b, [True, True, True]), (gn, xn, mean, rstd, wn, bn)),
        "native_layer_norm_backward_input_only": (lambda g, x, m, r: aten.native_layer_norm_backward(
            g, x, [32], m, r, None, None, [True, False, False]), (gn, xn, mean, rstd)),
    }
    if dtype == torch.float32:   # float32 addmm is taken with a full (m, n) self
        cases["addmm"] = (lambda b, x, w: aten.addmm(b, x, w), (torch.randn(64, 48), x, w))
    else:                        # 16-bit addmm with a bias row, (n,) or (1, n): linear's
        cases["addmm"] = (lambda b, x, w: aten.addmm(b, x, w), (torch.randn(48).to(dtype), x, w))
        cases["addmm_1n"] = (lambda b, x, w: aten.addmm(b, x, w), (torch.randn(1, 48).to(dtype), x, w))
        cases["linear"] = (lambda x, w, b: torch.nn.functional.linear(x, w, b), (x, w.t(), torch.randn(48).to(dtype)))
    return cases

def tensors(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]
'''


def test_new_ops_single_op_graphs_equal_eager_bit_for_bit(tmp_path):
    """addmm, _softmax_backward_data, _log_softmax, _log_softmax_backward_data, native_layer_norm_backward: the
    npugraph single-op graph on CPU tensors equals eager on npu tensors, in float16, bfloat16 and float32; and for
    each op, some dtype's CPU aten result differs, so the equality is the GE kernel's, not the CPU kernel's."""
    out = _ok(_NEW_OPS + textwrap.dedent("""
        cpu_differs = set()
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            for name, (fn, args) in inputs(dtype).items():
                torch._dynamo.reset()
                graph = tensors(torch.compile(fn, backend="npugraph", dynamic=False)(*args))
                eager = tensors(fn(*[a.npu() for a in args]))
                cpu = tensors(fn(*args))
                for i, (g, e, c) in enumerate(zip(graph, eager, cpu, strict=True)):
                    if c is None:   # left out by output_mask
                        assert e is None, (name, i)
                        continue
                    assert e.device.type == "npu" and e.dtype == c.dtype, (name, dtype, i, e.device, e.dtype)
                    assert torch.equal(e.cpu(), g), (name, dtype, i, (e.cpu().float() - g.float()).abs().max())
                    if not torch.equal(c, g):
                        cpu_differs.add(name.split("_1n")[0].replace("_input_only", ""))
                print(name, dtype, "equal")
        assert cpu_differs >= {"addmm", "_softmax_backward_data", "_log_softmax", "_log_softmax_backward_data",
                               "native_layer_norm_backward"}, cpu_differs
    """), tmp_path)
    assert out.count("equal") == 3 * 5 + 2 * 3 + 1


def test_new_ops_decline_what_their_kernels_do_not_take(tmp_path):
    """Inputs an adapter declines run the CPU kernel: the npu result equals CPU aten on the same values bit for
    bit. addmm: beta or alpha other than 1, a 16-bit (m, n) self and a float32 bias row (where torch_npu's
    aclnnAddmm and TorchAir's lowering part ways); float64 everywhere; a layer norm weight of another dtype."""
    out = _ok("""
        import torch
        aten = torch.ops.aten
        torch.manual_seed(0)
        x, w = torch.randn(64, 512), torch.randn(512, 48)
        h, hw, row = x.half(), w.half(), torch.randn(48)
        g, o = torch.randn(16, 256).double(), torch.softmax(torch.randn(16, 256).double(), -1)
        xn, mean, rstd = torch.randn(4, 32).half(), torch.randn(4, 1), torch.rand(4, 1) + 0.5
        cases = {
            "addmm 16-bit (m, n) self": (aten.addmm, (torch.randn(64, 48).half(), h, hw), {}),
            "addmm beta": (aten.addmm, (row.half(), h, hw), {"beta": 0.5}),
            "addmm alpha": (aten.addmm, (row.half(), h, hw), {"alpha": 2}),
            "addmm float32 bias row": (aten.addmm, (row, x, w), {}),
            "addmm float64": (aten.addmm, (row.double(), x.double(), w.double()), {}),
            "_log_softmax float64": (aten._log_softmax, (g, 1, False), {}),
            "_softmax_backward_data float64": (aten._softmax_backward_data, (g, o, 1, g.dtype), {}),
            "_log_softmax_backward_data float64": (aten._log_softmax_backward_data, (g, o, 1, g.dtype), {}),
            "native_layer_norm_backward float32 weight": (
                aten.native_layer_norm_backward, (xn, xn, [32], mean, rstd, torch.randn(32), None, [True, True, False]),
                {}),
        }
        for name, (op, args, kwargs) in cases.items():
            expected = op(*args, **kwargs)
            got = op(*[a.npu() if isinstance(a, torch.Tensor) else a for a in args], **kwargs)
            expected = expected if isinstance(expected, tuple) else (expected,)
            got = got if isinstance(got, tuple) else (got,)
            for e, n in zip(expected, got, strict=True):
                assert (e is None and n is None) or (n.device.type == "npu" and torch.equal(n.cpu(), e)), name
            print(name, "declined")
    """, tmp_path)
    assert out.count("declined") == 9


def test_a_yaml_op_declaring_aclnn_runs_its_reference_kernel_on_the_virtual_npu(tmp_path):
    """An Ascend program calling a YAML op that declares `aclnn:` (its NPU kernel: the Ascend C kernel through
    aclnn) runs unchanged on the virtual NPU, which has no CANN: the op's reference kernel on the device's memory.
    Oracle: the same op on CPU tensors (the reference kernel, CompositeExplicitAutograd)."""
    _ok("""
        import torch
        import op_plugin
        torch.manual_seed(0)
        x, w, b = torch.randn(4, 3, 16), torch.randn(8, 16), torch.randn(8)
        out = torch.ops.npu.npu_custom_linear(x.npu(), w.npu(), b.npu())
        assert out.device.type == "npu", out.device
        assert torch.equal(out.cpu(), torch.ops.npu.npu_custom_linear(x, w, b))
        y = torch.ops.npu.npu_vector_add(x.npu(), x.npu())
        assert torch.equal(y.cpu(), torch.ops.npu.npu_vector_add(x, x))
        print("ok")
    """, tmp_path)
