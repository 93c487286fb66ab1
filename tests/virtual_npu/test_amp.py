"""torch.autocast("npu") and torch.npu.amp on the virtual NPU (op_plugin/_simulator/device/amp.py): the cast
policies of torch_npu's AutocastPrivateUse1 kernels (Ascend/pytorch torch_npu/csrc/aten/AutoCastOps.cpp), float16
by default; GradScaler on npu tensors. Oracles: the dtypes torch's autocast lists give, the same code with the
casts written out on npu tensors (bit for bit), and GradScaler's arithmetic redone on CPU tensors."""
from __future__ import annotations

from .test_device import _ok, built_extension  # noqa: F401  (the module fixture builds the C++ part)


def test_autocast_casts_as_torch_npus_op_lists(tmp_path):
    out = _ok("""
        import torch
        F = torch.nn.functional
        assert torch.get_autocast_dtype("npu") == torch.float16 and torch.npu.get_autocast_dtype() == torch.float16
        assert torch.float16 in torch.npu.get_amp_supported_dtype()
        torch.manual_seed(0)
        x, w, b = torch.randn(4, 8).npu(), torch.randn(3, 8).npu(), torch.randn(3).npu()
        h = x.half()
        with torch.autocast("npu"):
            assert torch.npu.is_autocast_enabled()
            # lower_precision_fp: to the autocast dtype
            assert (x @ w.t()).dtype == torch.float16                      # matmul -> mm
            assert F.linear(x, w, b).dtype == torch.float16
            assert torch.bmm(x[None], w.t()[None]).dtype == torch.float16
            # fp32, fp32_set_opt_dtype, fp32_append_dtype: float32 whatever the inputs
            assert torch.softmax(h, -1).dtype == torch.float32 and torch.softmax(x, -1).dtype == torch.float32
            assert torch.log_softmax(h, -1).dtype == torch.float32
            assert F.layer_norm(h, (8,)).dtype == torch.float32
            assert torch.exp(h).dtype == torch.float32 and h.sum().dtype == torch.float32
            assert h.sum(dtype=torch.float16).dtype == torch.float16        # an explicit dtype stays
            assert h.norm().dtype == torch.float32
            assert F.cross_entropy(h, torch.tensor([0, 1, 2, 0]).npu()).dtype == torch.float32
            # promote: the widest floating dtype among the arguments
            assert torch.addcmul(x, h, h).dtype == torch.float32 and torch.addcmul(h, h, h).dtype == torch.float16
            # not on a list: as without autocast
            assert F.gelu(h).dtype == torch.float16 and torch.relu(x).dtype == torch.float32
            # only npu tensors are cast
            assert (torch.randn(2, 2) @ torch.randn(2, 2)).dtype == torch.float32
            try:
                F.binary_cross_entropy(torch.sigmoid(x), torch.rand(4, 8).npu())
            except RuntimeError as error:
                assert "unsafe to autocast" in str(error), error
            else:
                raise AssertionError("binary_cross_entropy under autocast")
        assert not torch.npu.is_autocast_enabled() and (x @ w.t()).dtype == torch.float32
        with torch.autocast(device_type="npu", dtype=torch.bfloat16):
            assert (x @ w.t()).dtype == torch.bfloat16 and torch.softmax(x, -1).dtype == torch.float32
        with torch.npu.amp.autocast():
            assert (x @ w.t()).dtype == torch.float16
        from torch.npu.amp import autocast
        with autocast(dtype=torch.bfloat16):
            assert F.linear(x, w, b).dtype == torch.bfloat16
        with torch.autocast("npu", enabled=False):
            assert (x @ w.t()).dtype == torch.float32
        print("ok")
    """, tmp_path)
    assert out.strip() == "ok"


_MODEL = """
import torch
F = torch.nn.functional
torch.manual_seed(0)
x, target = torch.randn(8, 16), torch.randint(0, 4, (8,))
w1, b1, w2, b2 = torch.randn(32, 16) * 0.2, torch.randn(32), torch.randn(4, 32) * 0.2, torch.randn(4)
g, beta = torch.randn(32), torch.randn(32)

def leaves():
    return [t.clone().npu().requires_grad_() for t in (w1, b1, w2, b2, g, beta)]

def autocast_loss(p):
    with torch.autocast("npu"):
        hidden = F.gelu(F.layer_norm(F.linear(x.npu(), p[0], p[1]), (32,), p[4], p[5]))
        return F.cross_entropy(F.linear(hidden, p[2], p[3]), target.npu())

def explicit_loss(p):
    # The casts autocast makes, written out: float16 linears, layer norm in float32; cross_entropy, on no list,
    # passes the logits' dtype to log_softmax (which stays float16) and nll_loss (fp32 policy) casts its input.
    h = F.linear(x.npu().half(), p[0].half(), p[1].half())
    hidden = F.gelu(F.layer_norm(h.float(), (32,), p[4], p[5]))
    logits = F.linear(hidden.half(), p[2].half(), p[3].half())
    return F.nll_loss(F.log_softmax(logits, 1).float(), target.npu())
"""


def test_autocast_forward_and_backward_equal_the_explicit_casts(tmp_path):
    """A linear / layer norm / gelu / linear / cross entropy step under autocast equals the same code with its
    casts written out, loss and every gradient bit for bit; the float16 linear is the GE kernel's
    (MatMulV2 with the bias fused, float32 accumulation)."""
    _ok(_MODEL + """
from op_plugin._simulator.interpreter.calls import ge_op
p, q = leaves(), leaves()
loss, reference = autocast_loss(p), explicit_loss(q)
assert loss.dtype == torch.float32 and torch.equal(loss.cpu(), reference.cpu())
loss.backward()
reference.backward()
for a, b in zip(p, q, strict=True):
    assert a.grad.device.type == "npu" and a.grad.dtype == torch.float32
    assert torch.equal(a.grad.cpu(), b.grad.cpu())
with torch.autocast("npu"):
    y = F.linear(x.npu(), w1.npu(), b1.npu())
assert torch.equal(y.cpu(), ge_op("MatMulV2")(x.half(), w1.half().t(), b1.half(), None))
""", tmp_path)


def test_grad_scaler_on_npu(tmp_path):
    """torch.amp.GradScaler("npu") and torch.npu.amp.GradScaler: unscaled gradients are the scaled backward's
    gradients times 1/scale (the same arithmetic on CPU tensors), a finite step runs the optimizer, a step with
    inf gradients is skipped and backs the scale off; torch_npu's dynamic=False keeps the scale."""
    _ok(_MODEL + """
def step(scaler, poison=False):
    p = leaves()
    optimizer = torch.optim.SGD(p, lr=0.1)
    loss = autocast_loss(p) * (float("inf") if poison else 1.0)
    scaler.scale(loss).backward()
    scaled = [t.grad.cpu().clone() for t in p]
    before = [t.detach().cpu().clone() for t in p]
    scaler.unscale_(optimizer)
    inv_scale = torch.full((), 1.0 / scaler.get_scale())
    for t, grad in zip(p, scaled, strict=True):   # bit for bit, infs and NaNs in their places
        torch.testing.assert_close(t.grad.cpu(), grad * inv_scale, rtol=0, atol=0, equal_nan=True)
    scaler.step(optimizer)
    scaler.update()
    moved = [not torch.equal(t.detach().cpu(), old) for t, old in zip(p, before, strict=True)]
    return any(moved), scaler.get_scale()

# init_scale 2**8: float16 gradients of this model overflow at GradScaler's default 2**16 (a skipped first step)
for scaler in (torch.amp.GradScaler("npu", init_scale=256.0, growth_interval=1),
               torch.npu.amp.GradScaler(init_scale=256.0, growth_interval=1)):
    assert step(scaler) == (True, 512.0)                  # finite: stepped, grown after growth_interval steps
    assert step(scaler, poison=True) == (False, 256.0)    # inf: skipped, backed off
static = torch.npu.amp.GradScaler(init_scale=1024.0, dynamic=False)
assert step(static) == (True, 1024.0) and step(static, poison=True) == (False, 1024.0)
assert static.state_dict()["dynamic"] is False
""", tmp_path)
