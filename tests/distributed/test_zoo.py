"""The distributed zoo: parallel models as users run them on NPUs, compiled with npugraph in GE mode on
2 gloo ranks, static and dynamic, every rank compared with eager (the same sharded code, not
compiled) and with the unsharded model computed on one rank.

* a Megatron tensor-parallel decoder block: attention with heads split over the ranks (q/k/v column
  parallel, the output projection row parallel) and a column/row-parallel MLP, one functional
  all_reduce after each row-parallel linear;
* a DTensor decoder block (`parallelize_module`): tests/distributed/test_dtensor.py;
* an expert-parallel MoE layer: top-1 routing, tokens dispatched to the rank holding their expert and
  combined back with all_to_all_single (uneven splits, different on each rank);
* a data-parallel training step: forward and backward compiled, the gradients averaged over the
  ranks by a compiled all_reduce("avg"), an SGD step; the updated weights equal one step on the
  whole batch.
"""
import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

HIDDEN, HEADS, FFN, SEQ = 16, 4, 32, 5
DYNAMIC = [pytest.param(False, id="static"), pytest.param(True, id="dynamic")]
ROWS = {False: [2], True: [2, 3]}  # batch sizes run per case (two sizes: the dynamic graph is reused)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _weights(seed: int = 3) -> dict:
    g = _generator(seed)
    shapes = {"wq": (HIDDEN, HIDDEN), "wk": (HIDDEN, HIDDEN), "wv": (HIDDEN, HIDDEN), "wo": (HIDDEN, HIDDEN),
              "w1": (FFN, HIDDEN), "w2": (HIDDEN, FFN)}
    weights = {name: torch.randn(shape, generator=g) / shape[1] ** 0.5 for name, shape in shapes.items()}
    weights.update(bo=torch.randn(HIDDEN, generator=g) / 4, b2=torch.randn(HIDDEN, generator=g) / 4)
    return weights


def _close(compiled, eager, unsharded, tolerance=1e-5):
    torch.testing.assert_close(compiled, eager, rtol=tolerance, atol=tolerance)
    torch.testing.assert_close(compiled, unsharded, rtol=1e-4, atol=1e-4)


# ---- Megatron tensor parallelism --------------------------------------------------------------------

def _block(x, w, heads, reduce=lambda t: t):
    """A pre-norm decoder block; with sharded weights `heads` is the local head count and `reduce`
    joins the row-parallel partial sums."""
    batch, seq, _ = x.shape
    h = torch.nn.functional.layer_norm(x, (HIDDEN,))
    q, k, v = ((h @ w[name].T).view(batch, seq, heads, -1).transpose(1, 2) for name in ("wq", "wk", "wv"))
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    scores = (q @ k.transpose(-1, -2) / (HIDDEN // HEADS) ** 0.5).masked_fill(~causal, float("-inf"))
    attention = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, seq, -1)
    x = x + reduce(attention @ w["wo"].T) + w["bo"]
    h = torch.nn.functional.layer_norm(x, (HIDDEN,))
    return x + reduce(torch.nn.functional.gelu(h @ w["w1"].T) @ w["w2"].T) + w["b2"]


def megatron_case(dynamic):
    rank, world = dist.get_rank(), dist.get_world_size()
    full = _weights()
    heads = slice(rank * HIDDEN // world, (rank + 1) * HIDDEN // world)  # this rank's heads' features
    ffn = slice(rank * FFN // world, (rank + 1) * FFN // world)
    shard = {"wq": full["wq"][heads], "wk": full["wk"][heads], "wv": full["wv"][heads], "wo": full["wo"][:, heads],
             "w1": full["w1"][ffn], "w2": full["w2"][:, ffn], "bo": full["bo"], "b2": full["b2"]}

    def tensor_parallel(x):
        return _block(x, shard, HEADS // world, lambda t: funcol.all_reduce(t, "sum", dist.group.WORLD))

    compiled = torch.compile(tensor_parallel, backend="npugraph", dynamic=dynamic, fullgraph=True)
    for rows in ROWS[dynamic]:
        x = torch.randn(rows, SEQ, HIDDEN, generator=_generator(rows))
        _close(compiled(x), tensor_parallel(x), _block(x, full, HEADS))


# ---- expert parallelism -----------------------------------------------------------------------------

def _experts(world: int) -> list[dict]:
    g = _generator(9)
    return [{"w1": torch.randn(FFN, HIDDEN, generator=g) / 4, "w2": torch.randn(HIDDEN, FFN, generator=g) / 6}
            for _ in range(world)]


def _expert(x, w):
    return torch.nn.functional.silu(x @ w["w1"].T) @ w["w2"].T


def _route(x, gate):
    """Top-1 routing: each token's expert (= the rank holding it) and its gate probability."""
    probabilities = (x @ gate.T).softmax(-1)
    weight, expert = probabilities.max(-1)
    return expert, weight


def moe_case(dynamic):
    """Each rank holds expert `rank` and routes its own tokens; the split sizes of the dispatch are
    the tokens per expert (uneven, different on each rank), exchanged first as torch's EP code does."""
    rank, world = dist.get_rank(), dist.get_world_size()
    experts, gate = _experts(world), torch.randn(world, HIDDEN, generator=_generator(8))

    def dispatch_compute_combine(tokens, weight, send_splits: list[int], recv_splits: list[int]):
        received = funcol.all_to_all_single(tokens, recv_splits, send_splits, dist.group.WORLD)
        returned = funcol.all_to_all_single(_expert(received, experts[rank]), send_splits, recv_splits,
                                            dist.group.WORLD)
        return returned * weight.unsqueeze(-1)

    compiled = torch.compile(dispatch_compute_combine, backend="npugraph", dynamic=dynamic, fullgraph=True)
    for tokens in ([7] if not dynamic else [7, 9]):
        x = torch.randn(tokens + rank, HIDDEN, generator=_generator(100 * rank + tokens))
        expert, weight = _route(x, gate)
        order = expert.argsort(stable=True)
        send = torch.bincount(expert, minlength=world)
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send)
        args = (x[order], weight[order], send.tolist(), recv.tolist())
        out, eager = torch.empty_like(x), torch.empty_like(x)
        out[order], eager[order] = compiled(*args), dispatch_compute_combine(*args)
        unsharded = torch.stack([_expert(x[t], experts[int(expert[t])]) * weight[t] for t in range(len(x))])
        _close(out, eager, unsharded)
    return send.tolist()


# ---- data parallelism -------------------------------------------------------------------------------

class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(4)  # the same initial weights on every rank
        self.body = torch.nn.Sequential(torch.nn.Linear(HIDDEN, FFN), torch.nn.GELU(), torch.nn.LayerNorm(FFN),
                                        torch.nn.Linear(FFN, 3))

    def forward(self, x, labels):
        return torch.nn.functional.cross_entropy(self.body(x), labels)


def _batch(rows: int, part: int):
    g = _generator(1000 + 10 * rows + part)
    return torch.randn(rows, HIDDEN, generator=g), torch.randint(0, 3, (rows,), generator=g)


def _average(grads):
    return [funcol.all_reduce(grad, "avg", dist.group.WORLD) for grad in grads]


def ddp_case(dynamic):
    rank, world = dist.get_rank(), dist.get_world_size()
    for rows in ROWS[dynamic]:
        results = []
        for compile_it in (True, False):
            torch._dynamo.reset()
            model = Classifier()
            forward = torch.compile(model, backend="npugraph", dynamic=dynamic) if compile_it else model
            average = torch.compile(_average, backend="npugraph", dynamic=dynamic) if compile_it else _average
            forward(*_batch(rows, rank)).backward()
            params = list(model.parameters())
            with torch.no_grad():
                for param, grad in zip(params, average([p.grad for p in params]), strict=True):
                    param -= 0.5 * grad
            results.append([p.detach().clone() for p in params])
        whole = Classifier()  # one step on the whole batch (the ranks' batches together), one process
        x, labels = (torch.cat(parts) for parts in zip(*(_batch(rows, r) for r in range(world)), strict=True))
        whole(x, labels).backward()
        with torch.no_grad():
            for param in whole.parameters():
                param -= 0.5 * param.grad
        for compiled, eager, unsharded in zip(*results, whole.parameters(), strict=True):
            _close(compiled, eager, unsharded.detach())


# ---- tests (parent side) ---------------------------------------------------------------------------

@pytest.mark.parametrize("dynamic", DYNAMIC)
def test_megatron_tensor_parallel_block(ranks, dynamic):
    ranks(2).run(megatron_case, dynamic)


@pytest.mark.parametrize("dynamic", DYNAMIC)
def test_expert_parallel_moe(ranks, dynamic):
    splits = ranks(2).run(moe_case, dynamic)
    assert len({tuple(s) for s in splits}) > 1 or len(set(splits[0])) > 1, f"even splits only: {splits}"


@pytest.mark.parametrize("dynamic", DYNAMIC)
def test_data_parallel_training_step(ranks, dynamic):
    ranks(2).run(ddp_case, dynamic)


def ddp_module_case(dynamic):
    """torch's DistributedDataParallel around the model, compiled with npugraph: dynamo's DDPOptimizer
    splits the graph at the gradient buckets (2 KiB buckets; it closes a bucket only where a node
    feeds a later piece: 2 pieces with dynamic=True, 1 static here), DDP's reducer averages the
    gradients; the updated weights equal one step on the whole batch."""
    from torch.nn.parallel import DistributedDataParallel

    rank, world = dist.get_rank(), dist.get_world_size()
    rows = 2
    model = Classifier()
    ddp = DistributedDataParallel(model, bucket_cap_mb=2048 / 2**20)  # 2 KiB buckets: 2-3 graph pieces
    first_bucket = torch.distributed._DEFAULT_FIRST_BUCKET_BYTES  # DDPOptimizer: first <= the others
    torch.distributed._DEFAULT_FIRST_BUCKET_BYTES = 1024
    try:
        npugraph, pieces = torch._dynamo.lookup_backend("npugraph"), []

        def counting_npugraph(gm, example_inputs):  # DDPOptimizer compiles each piece separately
            pieces.append(len(gm.graph.nodes))
            return npugraph(gm, example_inputs)

        compiled = torch.compile(ddp, backend=counting_npugraph, dynamic=dynamic)
        compiled(*_batch(rows, rank)).backward()
    finally:
        torch.distributed._DEFAULT_FIRST_BUCKET_BYTES = first_bucket
    with torch.no_grad():
        for param in model.parameters():
            param -= 0.5 * param.grad
    whole = Classifier()
    x, labels = (torch.cat(parts) for parts in zip(*(_batch(rows, r) for r in range(world)), strict=True))
    whole(x, labels).backward()
    with torch.no_grad():
        for param in whole.parameters():
            param -= 0.5 * param.grad
    for trained, unsharded in zip(model.parameters(), whole.parameters(), strict=True):
        torch.testing.assert_close(trained.detach(), unsharded.detach(), rtol=1e-4, atol=1e-5)
    return len(pieces)


@pytest.mark.parametrize("dynamic", DYNAMIC)
def test_ddp_module_compiled(ranks, dynamic):
    graphs = ranks(2).run(ddp_module_case, dynamic)
    assert graphs[0] == graphs[1] >= (2 if dynamic else 1), f"pieces compiled per rank: {graphs}"
