"""FSDP2 (`torch.distributed.fsdp.fully_shard`) under torch.compile on 2 gloo ranks, torch 2.13: a sharded
model compiled whole builds no graph with any backend (FSDP2's hooks are dynamo-disabled, so every frame
around them runs eagerly), and a compiled function called inside the sharded module's forward (on the
gathered, unsharded parameters) is a GE graph whose forward and gradients equal the unsharded model's.
docs/distributed.md pins this; the test says when torch changes it."""
import torch
import torch.distributed as dist

WORLD = 2


def _models():
    torch.manual_seed(0)  # the same full weights on every rank
    sharded = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    unsharded = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    unsharded.load_state_dict(sharded.state_dict())
    return sharded, unsharded


def _counting(name: str, counter: list):
    from torch._dynamo.backends.registry import lookup_backend

    inner = lookup_backend(name)

    def backend(gm, example_inputs):
        counter.append(name)
        return inner(gm, example_inputs)

    return backend


# ---- cases (run on every rank) ----------------------------------------------------------------------

def whole_model_case():
    """`torch.compile(fully_shard(model))`: no graph with eager, aot_eager or npugraph; eager's values."""
    from torch.distributed.fsdp import fully_shard

    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(dist.get_rank()))
    for backend in ("eager", "aot_eager", "npugraph"):
        torch._dynamo.reset()
        model, unsharded = _models()
        fully_shard(model[0])
        fully_shard(model[2])
        fully_shard(model)
        graphs: list = []
        out = torch.compile(model, backend=_counting(backend, graphs))(x)
        out.sum().backward()
        assert graphs == [], (backend, graphs)
        torch.testing.assert_close(out, unsharded(x))


def inner_function_case():
    """A function compiled with npugraph (fullgraph) called in the sharded module's forward."""
    from torch.distributed.fsdp import fully_shard

    rank = dist.get_rank()
    layers, unsharded = _models()
    graphs: list = []
    step = torch.compile(lambda x, w1, b1, w2, b2: torch.relu(x @ w1.T + b1) @ w2.T + b2,
                         backend=_counting("npugraph", graphs), fullgraph=True)

    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = layers[0], layers[2]

        def forward(self, x):
            return step(x, self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias)

    model = fully_shard(Mlp())
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(rank))
    out = model(x)
    out.sum().backward()
    want = unsharded(x)
    want.sum().backward()
    assert graphs == ["npugraph"], graphs
    torch.testing.assert_close(out, want)
    for sharded, full in ((model.fc1, unsharded[0]), (model.fc2, unsharded[2])):
        averaged = full.weight.grad.clone()
        dist.all_reduce(averaged)  # FSDP2 averages the ranks' gradients (reduce-scatter, then / world)
        torch.testing.assert_close(sharded.weight.grad.full_tensor(), averaged / WORLD)


# ---- tests (pytest side) ----------------------------------------------------------------------------

def test_fully_shard_compiled_whole_builds_no_graph(ranks):
    ranks(WORLD).run(whole_model_case)


def test_a_function_compiled_inside_the_sharded_forward(ranks):
    ranks(WORLD).run(inner_function_case)
