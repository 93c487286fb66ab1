"""The ops torch's generic kernels send only to device backends (`device_only_ops.py`): convolution through
`convolution_overrideable` / `convolution_backward_overrideable`, LSTM and GRU through the fused cell ops.
Each check runs in a child process with the virtual NPU active. The oracle is the same module or function
on CPU tensors (forward outputs and gradients): bit-equal for convolution (the same CPU kernel runs), tight
tolerances for the RNNs (CPU runs oneDNN's RNN or the unfused cell, the NPU path RNN.cu's fused cell math),
and torch's own differentiable cell backwards for the workspace layouts the fused backwards read."""
from __future__ import annotations

from .test_device import _ok, built_extension  # noqa: F401

_HELPERS = """
    import warnings
    import torch
    import torch.nn.functional as F
    from torch.testing import assert_close
    warnings.simplefilter("ignore")

    def run(fn, device, inputs, seed=0):
        # fn(*inputs on device) -> tensor or tuple; returns its outputs and the inputs' and module's grads
        torch.manual_seed(seed)
        ins = [t.detach().clone().to(device).requires_grad_(t.is_floating_point()) for t in inputs]
        out = fn(*ins)
        outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if o is not None]
        loss = sum((o.float() * torch.linspace(-1, 1, o.numel(), device=device).reshape(o.shape)).sum() for o in outs)
        loss.backward()
        for o in outs:
            assert o.device.type == device, (o.device, device)
        return [o.detach().cpu() for o in outs] + [t.grad.cpu() for t in ins if t.grad is not None]

    def same(fn, inputs, exact=True, **tol):
        cpu, npu = run(fn, "cpu", inputs), run(fn, "npu", inputs)
        assert len(cpu) == len(npu)
        for left, right in zip(cpu, npu):
            if exact:
                assert left.dtype == right.dtype and torch.equal(left, right), (left - right).abs().max()
            else:
                assert_close(right, left, **tol)
"""


def test_convolutions_equal_the_cpu_ones(tmp_path):
    _ok(_HELPERS + """
    r = torch.randn

    cases = [
        (lambda x, w, b: F.conv2d(x, w, b), [r(2, 3, 8, 8), r(4, 3, 3, 3), r(4)]),
        (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, dilation=2, groups=2),
         [r(2, 4, 9, 9), r(6, 2, 3, 3), r(6)]),
        (lambda x, w: F.conv2d(x, w, padding=1, groups=4), [r(2, 4, 9, 9), r(4, 1, 3, 3)]),  # depthwise
        (lambda x, w: F.conv2d(x, w, padding="same"), [r(2, 3, 8, 8), r(4, 3, 4, 4)]),
        (lambda x, w: F.conv2d(x, w, padding="valid", stride=(1, 2)), [r(2, 3, 8, 8), r(4, 3, 2, 3)]),
        (lambda x, w, b: F.conv2d(x.contiguous(memory_format=torch.channels_last), w, b),
         [r(2, 3, 8, 8), r(4, 3, 3, 3), r(4)]),
        (lambda x, w: F.conv2d(x.bfloat16(), w.bfloat16(), padding=1), [r(2, 3, 6, 6), r(4, 3, 3, 3)]),
        (lambda x, w: F.conv2d(x.double(), w.double()), [r(2, 3, 6, 6), r(4, 3, 3, 3)]),
        (lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=2, dilation=2), [r(2, 3, 20), r(5, 3, 3), r(5)]),
        (lambda x, w, b: F.conv1d(x, w, b, groups=3), [r(3, 20), r(6, 1, 3), r(6)]),  # unbatched
        (lambda x, w, b: F.conv3d(x, w, b, padding=1), [r(1, 2, 5, 6, 7), r(3, 2, 3, 3, 3), r(3)]),
        (lambda x, w: F.conv3d(x, w, dilation=2, groups=2, stride=2), [r(1, 4, 7, 7, 7), r(4, 2, 2, 2, 2)]),
        (lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2, output_padding=1), [r(2, 3, 10), r(3, 4, 3), r(4)]),
        (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=3, dilation=2),
         [r(2, 6, 5, 5), r(6, 2, 3, 3), r(6)]),
        (lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2), [r(1, 2, 3, 4, 5), r(2, 3, 2, 2, 2), r(3)]),
        (lambda x, w: F.conv2d(x, w), [r(0, 3, 8, 8), r(4, 3, 3, 3)]),  # empty batch: torch's Empty backend
    ]
    for index, (fn, inputs) in enumerate(cases):
        try:
            same(fn, inputs)
        except Exception as error:
            raise AssertionError(f"conv case {index}") from error

    # Modules with padding modes and biases: outputs, input grads and parameter grads bit for bit.
    def train(make, x, device):
        torch.manual_seed(1)
        m = make().to(device)
        x = x.detach().to(device).requires_grad_()
        out = m(x)
        (out * out).sum().backward()
        return [out, x.grad] + [p.grad for p in m.parameters()]

    for make, x in [
        (lambda: torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), r(2, 3, 8, 8)),
        (lambda: torch.nn.Conv1d(3, 4, 3, padding=2, padding_mode="circular"), r(2, 3, 8)),
        (lambda: torch.nn.Conv3d(2, 4, 3, padding=1, padding_mode="replicate", bias=False), r(1, 2, 4, 5, 6)),
        (lambda: torch.nn.ConvTranspose2d(4, 2, 3, stride=2, groups=2), r(2, 4, 5, 5)),
        (lambda: torch.nn.Sequential(  # a small CNN: conv, batch norm, relu, pool, head
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 8, 3, padding=1, groups=8), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
            torch.nn.Linear(8, 2)), r(4, 3, 8, 8)),
    ]:
        for left, right in zip(train(make, x, "cpu"), train(make, x, "npu")):
            assert right.device.type == "npu" and torch.equal(left, right.cpu()), (left - right.cpu()).abs().max()

    # Double backward (convolution_backward's derivative calls convolution and convolution_backward again).
    args = [torch.randn(1, 2, 5, 5, dtype=torch.float64, device="npu", requires_grad=True),
            torch.randn(3, 2, 3, 3, dtype=torch.float64, device="npu", requires_grad=True),
            torch.randn(3, dtype=torch.float64, device="npu", requires_grad=True)]
    conv = lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1)
    assert torch.autograd.gradcheck(conv, args) and torch.autograd.gradgradcheck(conv, args)
    print("ok")
    """, tmp_path)


def test_convolution_backward_overrideable_follows_output_mask(tmp_path):
    _ok("""
    import itertools
    import torch
    aten = torch.ops.aten
    torch.manual_seed(0)
    for transposed, groups in [(False, 1), (False, 2), (True, 2)]:
        x = torch.randn(2, 4, 6, 6)
        w = torch.randn(4, 3, 3, 3) if transposed else torch.randn(6, 4 // groups, 3, 3)
        params = ([2, 1], [1, 1], [1, 1], transposed, [1, 0] if transposed else [0, 0], groups)
        y = aten.convolution(x, w, None, *params)
        g = torch.randn_like(y)
        assert torch.equal(aten.convolution_overrideable(x.npu(), w.npu(), None, *params).cpu(), y)
        for mask in itertools.product([False, True], repeat=3):
            mask = list(mask)
            want = aten.convolution_backward(g, x, w, [y.size(1)], *params, mask)
            got = aten.convolution_backward_overrideable(g.npu(), x.npu(), w.npu(), *params, mask)
            for wanted, gotten, on in zip(want, got, mask):
                if not on:  # undefined, as a device kernel leaves it (CPU's oneDNN backend may give more)
                    assert gotten is None, mask
                else:
                    assert gotten.device.type == "npu" and torch.equal(gotten.cpu(), wanted), mask
    print("ok")
    """, tmp_path)


def test_rnns_equal_the_cpu_ones(tmp_path):
    _ok(_HELPERS + """
    tol = dict(rtol=1e-5, atol=1e-6)

    def with_param_grads(cls, x, device, **kw):
        torch.manual_seed(3)
        m = cls(input_size=3, hidden_size=4, **kw).to(device)
        x = x.detach().to(device).requires_grad_()
        out, hidden = m(x)
        hidden = hidden if isinstance(hidden, tuple) else (hidden,)
        (out.pow(2).sum() + sum(h.sum() for h in hidden)).backward()
        return [out, *hidden, x.grad] + [p.grad for p in m.parameters()]

    configs = [dict(), dict(batch_first=True), dict(bidirectional=True), dict(num_layers=2), dict(bias=False),
               dict(num_layers=2, bidirectional=True, batch_first=True, bias=False)]
    for cls in (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN):
        for kw in configs:
            x = torch.randn(2, 5, 3) if kw.get("batch_first") else torch.randn(5, 2, 3)
            for left, right in zip(with_param_grads(cls, x, "cpu", **kw), with_param_grads(cls, x, "npu", **kw)):
                assert right.device.type == "npu", right.device
                assert_close(right.cpu(), left, **tol, msg=lambda m: f"{cls.__name__} {kw}: {m}")
    # LSTM with projections; dropout between layers (same CPU generator, same masks)
    for kw in [dict(hidden_size=6, proj_size=2, num_layers=2), dict(hidden_size=4, num_layers=3, dropout=0.5)]:
        def lstm(x, kw=kw):
            torch.manual_seed(3)
            return torch.nn.LSTM(input_size=3, **kw).to(x.device)(x)[0]
        same(lstm, [torch.randn(5, 2, 3)], exact=False, **tol)

    # Cells, with a given state and without one; a packed sequence.
    for cls in (torch.nn.LSTMCell, torch.nn.GRUCell):
        for bias in (True, False):
            def cell(x, h, cls=cls, bias=bias):
                torch.manual_seed(3)
                m = cls(3, 4, bias=bias).to(x.device)
                state = (h, h * 0.5) if cls is torch.nn.LSTMCell else h
                first = m(x, state)
                return (*first, *m(x)) if cls is torch.nn.LSTMCell else (first, m(x))
            same(cell, [torch.randn(2, 3), torch.randn(2, 4)], exact=False, **tol)

    def packed(x):
        torch.manual_seed(3)
        out, (h, c) = torch.nn.LSTM(3, 4, bidirectional=True).to(x.device)(
            torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor([5, 3]), enforce_sorted=True))
        return torch.nn.utils.rnn.pad_packed_sequence(out)[0], h, c
    same(packed, [torch.randn(5, 2, 3)], exact=False, **tol)

    # 16-bit: the fused cells compute in float32 and store in the input dtype (RNN.cu's accscalar_t)
    for dtype, atol in [(torch.float16, 3e-3), (torch.bfloat16, 2e-2)]:
        for cls in (torch.nn.LSTM, torch.nn.GRU):
            torch.manual_seed(0)
            m, x = cls(3, 8, num_layers=2, bidirectional=True), torch.randn(6, 2, 3)
            reference = m(x)[0]
            out = m.to("npu", dtype)(x.to("npu", dtype))[0]
            assert out.dtype == dtype
            assert_close(out.cpu().float(), reference, rtol=0, atol=atol)
            out.float().sum().backward()
            assert all(p.grad.dtype == dtype and torch.isfinite(p.grad).all() for p in m.parameters())
    print("ok")
    """, tmp_path)


def test_fused_cells_gradcheck_and_workspaces(tmp_path):
    _ok("""
    import torch
    from torch.testing import assert_close
    aten = torch.ops.aten
    torch.manual_seed(0)
    B, H = 3, 2

    def r(*shape):
        return torch.randn(*shape, dtype=torch.float64, device="npu", requires_grad=True)

    for bias in (True, False):
        lstm = [r(B, 4 * H), r(B, 4 * H), r(B, H)] + ([r(4 * H), r(4 * H)] if bias else [])
        for pick in (slice(0, 2), 0, 1):  # both grads, grad_cy undefined, grad_hy undefined
            f = lambda *a, pick=pick: aten._thnn_fused_lstm_cell(*a)[pick]
            assert torch.autograd.gradcheck(f, lstm)
        assert torch.autograd.gradgradcheck(lambda *a: aten._thnn_fused_lstm_cell(*a)[:2], lstm)
        gru = [r(B, 3 * H), r(B, 3 * H), r(B, H)] + ([r(3 * H), r(3 * H)] if bias else [])
        assert torch.autograd.gradcheck(lambda *a: aten._thnn_fused_gru_cell(*a)[0], gru)
        assert torch.autograd.gradgradcheck(lambda *a: aten._thnn_fused_gru_cell(*a)[0], gru)

    # The backwards read the forward's workspace: equal to torch's differentiable cell backwards (CPU),
    # which recompute everything from the gates.
    for dtype, tol in [(torch.float64, dict(rtol=1e-12, atol=1e-12)), (torch.float32, dict(rtol=1e-5, atol=1e-6))]:
        for bias in (True, False):
            g = lambda *shape: torch.randn(*shape, dtype=dtype)
            ig, hg, cx = g(B, 4 * H), g(B, 4 * H), g(B, H)
            bi, bh = (g(4 * H), g(4 * H)) if bias else (None, None)
            npu = lambda t: None if t is None else t.npu()
            hy, cy, workspace = aten._thnn_fused_lstm_cell(npu(ig), npu(hg), npu(cx), npu(bi), npu(bh))
            assert workspace.shape == (B, 4 * H) and workspace.dtype == dtype
            gates = (ig + hg + (bi + bh if bias else 0)).chunk(4, 1)
            i, f, c, o = gates[0].sigmoid(), gates[1].sigmoid(), gates[2].tanh(), gates[3].sigmoid()
            assert_close(workspace.cpu(), torch.cat([i, f, c, o], 1), **tol)
            assert_close(cy.cpu(), f * cx + i * c, **tol)
            assert_close(hy.cpu(), o * (f * cx + i * c).tanh(), **tol)
            for ghy, gcy in [(g(B, H), g(B, H)), (g(B, H), None), (None, g(B, H))]:
                with torch.no_grad():  # as autograd calls it
                    got = aten._thnn_fused_lstm_cell_backward(npu(ghy), npu(gcy), npu(cx), cy, workspace, bias)
                want = aten._thnn_differentiable_lstm_cell_backward(ghy, gcy, ig, hg, bi, bh, cx, cy.cpu())
                for gotten, wanted in zip(got[:3], want[:3]):
                    assert gotten.device.type == "npu"
                    assert_close(gotten.cpu(), wanted, **tol)
                if bias:  # the fused backward gives one bias grad for both biases
                    assert_close(got[3].cpu(), want[3], **tol)
                    assert_close(got[4].cpu(), want[4], **tol)
                else:
                    assert got[3] is None and got[4] is None

            ig, hg, hx = g(B, 3 * H), g(B, 3 * H), g(B, H)
            bi, bh = (g(3 * H), g(3 * H)) if bias else (None, None)
            hy, workspace = aten._thnn_fused_gru_cell(npu(ig), npu(hg), npu(hx), npu(bi), npu(bh))
            assert workspace.shape == (B, 5 * H) and workspace.dtype == dtype
            assert torch.equal(workspace[:, 3 * H:4 * H].cpu(), hx)  # hx kept as is
            ghy = g(B, H)
            with torch.no_grad():
                got = aten._thnn_fused_gru_cell_backward(ghy.npu(), workspace, bias)
            want = aten._thnn_differentiable_gru_cell_backward(ghy, ig, hg, hx, bi, bh)
            for gotten, wanted in zip(got, want):
                if wanted is None:
                    assert gotten is None
                else:
                    assert gotten.device.type == "npu"
                    assert_close(gotten.cpu(), wanted, **tol)
            # hy: nn.GRU's formula, n = tanh(x_n + b_in + r * (h_n + b_hn)), hy = (1 - i) * n + i * hx
            r_, i_, _ = (ig + hg + (bi + bh if bias else 0)).chunk(3, 1)
            hn = hg[:, 2 * H:] + (bh[2 * H:] if bias else 0)
            n_ = (ig[:, 2 * H:] + (bi[2 * H:] if bias else 0) + r_.sigmoid() * hn).tanh()
            assert_close(hy.cpu(), (1 - i_.sigmoid()) * n_ + i_.sigmoid() * hx, **tol)
            assert_close(workspace.cpu(), torch.cat([r_.sigmoid(), i_.sigmoid(), n_, hx, hn], 1), **tol)

    # 16-bit inputs: computed in float32 and rounded once into the input dtype (RNN.cu's H2F/F2H), so equal
    # to the float32 op on the same values, rounded.
    for dtype in (torch.float16, torch.bfloat16):
        for factor, fused in [(4, aten._thnn_fused_lstm_cell), (3, aten._thnn_fused_gru_cell)]:
            args = [torch.randn(B, factor * H), torch.randn(B, factor * H), torch.randn(B, H),
                    torch.randn(factor * H), torch.randn(factor * H)]
            low = fused(*(a.to("npu", dtype) for a in args))
            high = fused(*(a.to(dtype).float().npu() for a in args))
            for left, right in zip(low, high):
                assert left.dtype == dtype and torch.equal(left.cpu(), right.cpu().to(dtype))
            # the backwards on the same 16-bit values (grad, states, workspace) upcast to float32
            grad, up = torch.randn(B, H).to("npu", dtype), lambda t: t.float()
            with torch.no_grad():
                if factor == 4:
                    cx, cy, workspace = args[2].to("npu", dtype), low[1], low[2]
                    low = aten._thnn_fused_lstm_cell_backward_impl(grad, None, cx, cy, workspace, True)
                    high = aten._thnn_fused_lstm_cell_backward_impl(up(grad), None, up(cx), up(cy), up(workspace),
                                                                    True)
                    pairs = zip(low[:2], high[:2])  # grad_gates, grad_cx
                else:
                    workspace = low[1]
                    low = aten._thnn_fused_gru_cell_backward(grad, workspace, True)
                    high = aten._thnn_fused_gru_cell_backward(up(grad), up(workspace), True)
                    pairs = zip(low[:3], high[:3])  # grad_input_gates, grad_hidden_gates, grad_hx
            for left, right in pairs:
                assert left.dtype == dtype and torch.equal(left.cpu(), right.cpu().to(dtype))

    # Refused as RNN.cu refuses: mixed dtypes, wrong sizes.
    for bad in [lambda: aten._thnn_fused_lstm_cell(torch.zeros(2, 8, device="npu"),
                                                   torch.zeros(2, 8, device="npu", dtype=torch.float64),
                                                   torch.zeros(2, 2, device="npu")),
                lambda: aten._thnn_fused_gru_cell(torch.zeros(2, 6, device="npu"), torch.zeros(2, 6, device="npu"),
                                                  torch.zeros(2, 3, device="npu")),
                lambda: aten._thnn_fused_gru_cell_backward(torch.zeros(2, 2, device="npu"),
                                                           torch.zeros(2, 8, device="npu"), False)]:
        try:
            bad()
        except RuntimeError as error:
            assert "expected" in str(error), error
        else:
            raise AssertionError("accepted")
    print("ok")
    """, tmp_path)


def test_sdpa_takes_the_math_path_on_npu(tmp_path):
    # torch's SDPA picks `_scaled_dot_product_fused_attention_overrideable` only for a backend that registers
    # `_fused_sdp_choice_stub`; the virtual NPU does not, so SDPA runs the math path. Checked against CPU's
    # math path in every float dtype, with masks, dropout (same CPU generator, same mask) and backward.
    _ok("""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.testing import assert_close

    def attend(device, dtype, mask, dropout, causal, gqa):
        torch.manual_seed(0)
        kv = 6 if causal else 7
        q = torch.randn(2, 4, 6, 8, dtype=dtype).to(device).requires_grad_()
        k = torch.randn(2, 2 if gqa else 4, kv, 8, dtype=dtype).to(device).requires_grad_()
        v = torch.randn(2, 2 if gqa else 4, kv, 8, dtype=dtype).to(device).requires_grad_()
        m = {None: None, "bool": (torch.rand(6, kv) > 0.3), "float": torch.randn(2, 1, 6, kv, dtype=dtype)}[mask]
        m = None if m is None else m.to(device)
        torch.manual_seed(5)
        with sdpa_kernel(SDPBackend.MATH):
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=dropout, is_causal=causal,
                                                 enable_gqa=gqa)
        out.float().pow(2).sum().backward()
        return [out, q.grad, k.grad, v.grad]

    for dtype, tol in [(torch.float32, dict(rtol=1e-5, atol=1e-5)), (torch.float16, dict(rtol=2e-3, atol=2e-3)),
                       (torch.bfloat16, dict(rtol=1.6e-2, atol=1.6e-2))]:
        for mask, dropout, causal, gqa in [(None, 0.0, False, False), ("bool", 0.3, False, False),
                                           ("float", 0.2, False, False), (None, 0.1, True, False),
                                           (None, 0.0, False, True)]:
            cpu = attend("cpu", dtype, mask, dropout, causal, gqa)
            npu = attend("npu", dtype, mask, dropout, causal, gqa)
            for left, right in zip(cpu, npu):
                assert right.device.type == "npu" and right.dtype == dtype
                assert_close(right.cpu(), left, **tol, msg=lambda m: f"{dtype} {mask} {dropout} {causal}: {m}")
    print("ok")
    """, tmp_path)


def test_histc_takes_integers_as_the_device_kernel_does(tmp_path):
    """aclnnHistc (and CUDA's histc) count integer tensors; CPU's refuses them. transformers' MoE layers call
    histc on int32 expert ids off CPU. Oracle: the same counts of the values as float32 on CPU."""
    _ok("""
        import torch
        for dtype in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64):
            x = torch.tensor([0, 1, 1, 3, 2, 7, 9], dtype=dtype)
            out = torch.histc(x.npu(), bins=8, min=0, max=7)
            assert out.device.type == "npu" and out.dtype == dtype, (dtype, out)
            assert torch.equal(out.cpu(), torch.histc(x.float(), bins=8, min=0, max=7).to(dtype)), dtype
        f = torch.randn(50)
        assert torch.equal(torch.histc(f.npu(), bins=5).cpu(), torch.histc(f, bins=5))   # floats: CPU's kernel
    """, tmp_path)
