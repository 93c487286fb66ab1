"""TorchAir's process-wide torch patches apply while TorchAir compiles, and only then (CPU host)."""
import subprocess
import sys
import textwrap


def test_after_an_npugraph_compile_torch_keeps_its_own_decompositions_and_meta_kernels():
    # A fresh process: the first get_npu_backend is the one that patches.
    script = textwrap.dedent("""
        import torch
        from torch._decomp import decomposition_table
        from torch._subclasses import fake_tensor
        from torch.fx.experimental.proxy_tensor import make_fx
        import op_plugin
        from op_plugin._simulator import load_simulated_torchair

        aten = torch.ops.aten
        ops = [aten.native_dropout.default, aten.native_dropout_backward.default,
               aten._native_batch_norm_legit_no_training.default]
        before = {op: (decomposition_table.get(op), dict(op.py_kernels)) for op in ops}
        fake_before = fake_tensor.torch_decomp_decompositions

        compiled = torch.compile(lambda x: torch.relu(x) * 2, backend="npugraph")
        torch.testing.assert_close(compiled(torch.randn(3)).shape, torch.Size([3]))

        for op in ops:
            assert decomposition_table.get(op) is before[op][0], op
            assert dict(op.py_kernels) == before[op][1], op
        assert fake_tensor.torch_decomp_decompositions is fake_before

        # While TorchAir compiles, its NPU Meta functions and decompositions are in place.
        from torchair import npu_fx_compiler
        from torchair._utils import npu_meta_table
        with npu_fx_compiler._op_plugin_patches.active():
            for op in ops:
                assert decomposition_table.get(op) is npu_meta_table[op], op

        # The public table traces dropout with torch's own decomposition: a real mask, real values.
        gm = make_fx(lambda x: aten.native_dropout(x, 0.5, True),
                     decomposition_table=decomposition_table)(torch.ones(64))
        out, mask = gm(torch.ones(64))
        assert set(out.unique().tolist()) <= {0.0, 2.0} and torch.equal(out != 0, mask)
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


def test_a_compiled_training_step_does_not_trace_torchair_or_the_executor():
    """loss.backward() inside a compiled function compiles and runs the backward graph lazily, in a
    region dynamo evaluates frames in: TorchAir's compiler and the simulator's native stand-in must
    stay opaque to dynamo (as the native module is on an NPU), not be traced with fake tensors."""
    import torch
    from torch._dynamo.testing import CompileCounterWithBackend

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    x, target = torch.randn(4, 6), torch.randn(4, 3)

    def step(m, x, target):
        loss = ((m(x) - target) ** 2).mean()
        loss.backward()
        return loss

    def grads(fn):
        model.zero_grad()
        loss = fn(model, x, target)
        return [loss.detach()] + [p.grad.clone() for p in model.parameters()]

    expected = grads(step)
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("npugraph")
    got = grads(torch.compile(step, backend=counter))
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)
    assert counter.frame_count <= 2, counter.frame_count   # the step (and its resume); never TorchAir's frames
