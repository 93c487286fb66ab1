"""`torch.npu.make_graphed_callables` on the virtual NPU (issue 33 item 2): each check runs a script in a child
process with OP_PLUGIN_VIRTUAL_NPU=1. The oracle is the same callable run eagerly on CPU tensors: the graphed
callable's outputs and gradients after several replays with new inputs must equal it."""
from __future__ import annotations

from .test_device import _ok, built_extension  # noqa: F401  (the module fixture builds the C++ part)


def test_a_graphed_module_trains_as_the_eager_cpu_module(tmp_path):
    out = _ok("""
        import copy, torch
        torch.manual_seed(0)
        cpu = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        npu = copy.deepcopy(cpu).npu()
        sample = torch.randn(3, 4).npu()
        graphed = torch.npu.make_graphed_callables(npu, (sample,))
        assert graphed is npu  # a module keeps its identity, its forward replays the graphs
        opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.1)
        opt_npu = torch.optim.SGD(npu.parameters(), lr=0.1)  # in place: the graphs read the new weights
        before = None
        for step in range(4):
            x, target = torch.randn(3, 4), torch.randn(3, 2)
            results = []
            for model, opt, device in ((cpu, opt_cpu, "cpu"), (npu, opt_npu, "npu")):
                opt.zero_grad()
                y = model(x.to(device))
                ((y - target.to(device)) ** 2).sum().backward()
                results.append((y.detach().cpu(), [p.grad.cpu() for p in model.parameters()]))
                opt.step()
            (y_cpu, grads_cpu), (y_npu, grads_npu) = results
            assert type(y.grad_fn).__name__ == "GraphedBackward", y.grad_fn
            assert torch.equal(y_cpu, y_npu), (step, y_cpu, y_npu)
            for a, b in zip(grads_cpu, grads_npu, strict=True):
                assert torch.equal(a, b), (step, a, b)
            if step == 1:
                before = torch.npu.memory_allocated()
        assert torch.npu.memory_allocated() == before  # the replays write the captured memory
        npu.eval()  # another training flag than the graphed one: the original forward runs
        y = npu(torch.ones(3, 4, device="npu"))
        assert type(y.grad_fn).__name__ == "AddmmBackward0", y.grad_fn
        with torch.no_grad():
            assert torch.equal(y.cpu(), cpu(torch.ones(3, 4)))
        print("ok")
    """, tmp_path)
    assert out.strip() == "ok"


def test_a_graphed_function_with_two_outputs(tmp_path):
    _ok("""
        import torch
        def f(a, b):
            return (a * b).sin() + a.exp(), (a @ b.t()).relu().sum()
        torch.manual_seed(0)
        a = torch.randn(3, 5, device="npu", requires_grad=True)
        b = torch.randn(3, 5, device="npu", requires_grad=True)
        graphed = torch.npu.make_graphed_callables(f, (a, b), num_warmup_iters=1)
        for _ in range(3):
            a_cpu = torch.randn(3, 5, requires_grad=True)
            b_cpu = torch.randn(3, 5, requires_grad=True)
            a_npu = a_cpu.detach().npu().requires_grad_()
            b_npu = b_cpu.detach().npu().requires_grad_()
            first, second = f(a_cpu, b_cpu)
            (first.square().sum() + 3 * second).backward()
            g_first, g_second = graphed(a_npu, b_npu)
            assert g_first.requires_grad and g_second.shape == ()
            (g_first.square().sum() + 3 * g_second).backward()
            assert torch.equal(g_first.detach().cpu(), first.detach()) and torch.equal(g_second.cpu(), second)
            assert torch.equal(a_npu.grad.cpu(), a_cpu.grad) and torch.equal(b_npu.grad.cpu(), b_cpu.grad)
    """, tmp_path)


def test_a_tuple_of_two_callables(tmp_path):
    _ok("""
        import copy, torch
        torch.manual_seed(0)
        first_cpu, second_cpu = torch.nn.Linear(6, 4), torch.nn.Sequential(torch.nn.Tanh(), torch.nn.Linear(4, 2))
        first, second = copy.deepcopy(first_cpu).npu(), copy.deepcopy(second_cpu).npu()
        x = torch.randn(5, 6, device="npu")  # the data: no grad
        h = torch.randn(5, 4, device="npu", requires_grad=True)  # first's output: requires grad
        graphed = torch.npu.make_graphed_callables((first, second), ((x,), (h,)))
        assert graphed == (first, second)
        for _ in range(3):
            data = torch.randn(5, 6)
            for p in (*first_cpu.parameters(), *second_cpu.parameters(), *first.parameters(),
                      *second.parameters()):
                p.grad = None
            out_cpu = second_cpu(first_cpu(data))
            out_cpu.sum().backward()
            out = second(first(data.npu()))
            out.sum().backward()
            assert torch.equal(out.detach().cpu(), out_cpu.detach())
            for a, b in zip((*first_cpu.parameters(), *second_cpu.parameters()),
                            (*first.parameters(), *second.parameters()), strict=True):
                assert torch.equal(a.grad, b.grad.cpu()), (a.grad, b.grad)
    """, tmp_path)


def test_unused_input_and_bad_arguments(tmp_path):
    out = _ok("""
        import torch
        def f(a, b):
            return a * 2
        a = torch.ones(3, device="npu", requires_grad=True)
        b = torch.ones(3, device="npu", requires_grad=True)
        try:
            torch.npu.make_graphed_callables(f, (a, b))
        except RuntimeError as error:  # torch.autograd.grad's own refusal, as with torch.cuda
            assert "appears to not have been used in the graph" in str(error), error
            assert "allow_unused=True" in str(error), error
        else:
            raise AssertionError("an unused input accepted")
        graphed = torch.npu.make_graphed_callables(f, (a, b), allow_unused_input=True)
        x, y = torch.full((3,), 2.0, device="npu", requires_grad=True), torch.ones(3, device="npu",
                                                                                  requires_grad=True)
        graphed(x, y).sum().backward()
        assert x.grad.tolist() == [2.0, 2.0, 2.0] and y.grad is None
        hooked = torch.nn.Linear(2, 2).npu()
        hooked.register_forward_hook(lambda *args: None)
        calls = {
            "hooks": lambda: torch.npu.make_graphed_callables(hooked, (torch.ones(1, 2, device="npu"),)),
            "not tensors": lambda: torch.npu.make_graphed_callables(f, (a, 3)),
            "a bare tensor": lambda: torch.npu.make_graphed_callables(f, a),
            "lengths": lambda: torch.npu.make_graphed_callables((f, f), ((a, b),)),
        }
        for name, call in calls.items():
            try:
                call()
            except RuntimeError as error:
                assert str(error).startswith("torch.npu.make_graphed_callables: "), error
                print(name, "|", error)
            else:
                raise AssertionError(name)
    """, tmp_path)
    assert "hooks | torch.npu.make_graphed_callables: Modules must not have hooks registered" in out
    assert "not tensors | torch.npu.make_graphed_callables: In the beta API, sample_args" in out
    assert "a bare tensor | torch.npu.make_graphed_callables: the sample_args of a callable must be a tuple" in out
