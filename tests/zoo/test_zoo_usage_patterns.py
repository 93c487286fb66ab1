"""How people run models (issue 27), with public model code from transformers (tiny configs, random
weights) through npugraph, against eager (and aot_eager where a second oracle helps):

- `generate()` with the default dynamic cache and with `cache_implementation="static"`, the model's
  forward compiled (greedy tokens equal eager's; every step's scores within ATOL);
- `torch.export` with dynamic batch and length, then `ep.module()` compiled with dynamic=True;
- a compiled AdamW step on a decoder's gradients (parameters and optimizer state against eager's);
- a training step under bf16 autocast (tolerance: a multiple of the bf16 noise aot_eager shows);
- a training step with `gradient_checkpointing_enable()`;
- Mamba (MambaForCausalLM): forward and backward, static and dynamic.
"""
import pytest
import torch
import torch._dynamo.testing

import op_plugin  # noqa: F401  (the npugraph backend)

ATOL = 1e-4
NEW_TOKENS = 5


def _tokens(vocab, batch, length, seed=0):
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def _generate(model, ids, **kwargs):
    with torch.no_grad():
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS, do_sample=False,
                              output_scores=True, return_dict_in_generate=True, pad_token_id=0, **kwargs)


def _assert_same_generation(actual, expected):
    torch.testing.assert_close(actual.sequences, expected.sequences, rtol=0, atol=0)
    for step, (a, e) in enumerate(zip(actual.scores, expected.scores, strict=True)):
        torch.testing.assert_close(a, e, atol=ATOL, rtol=0, msg=lambda s, step=step: f"step {step}: {s}")


@pytest.mark.parametrize("cache", ["dynamic", "static"])
@pytest.mark.parametrize("name", ["llama"])
def test_generate_matches_eager(name, cache, zoo, vocab):
    """transformers' generate() with the model's forward compiled: the dynamic cache grows each step
    (compiled with dynamic=True); the static cache has a fixed size, written with index_copy_."""
    model = zoo[name].build()
    ids = _tokens(vocab, 2, 4)
    options = {"cache_implementation": "static"} if cache == "static" else {}
    expected = _generate(model, ids, **options)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("npugraph")
    eager_forward = model.forward
    model.forward = torch.compile(eager_forward, backend=counter, dynamic=cache == "dynamic")
    try:
        actual = _generate(model, ids, **options)
    finally:
        model.forward = eager_forward
    assert counter.frame_count >= 1
    _assert_same_generation(actual, expected)


def test_exported_decoder_compiled_with_dynamic_shapes(zoo):
    """torch.export (non-strict) with a dynamic batch and length, then `ep.module()` compiled with
    dynamic=True over two sizes (its _assert_tensor_metadata checks lower to nothing); no more
    graphs than aot_eager compiles for the same calls."""
    m = zoo["llama"]
    model = m.build()
    batch, length = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("length", min=2, max=32)
    first = m.inputs(*m.sizes[0])
    exported = torch.export.export(  # use_cache=False: a DynamicCache output is no pytree
        model, (), kwargs={**first, "use_cache": False}, strict=False,
        dynamic_shapes={**{key: {0: batch, 1: length} for key in first}, "use_cache": None}).module()
    frames = {}
    for backend in ("aot_eager", "npugraph"):  # aot_eager: the recompiles that are dynamo's, not npugraph's
        torch._dynamo.reset()
        counter = torch._dynamo.testing.CompileCounterWithBackend(backend)
        compiled = torch.compile(exported, backend=counter, dynamic=True)
        for sizes in m.sizes[:2]:
            inputs = m.inputs(*sizes)
            with torch.no_grad():
                actual = compiled(**inputs, use_cache=False).logits
                torch.testing.assert_close(actual, model(**inputs, use_cache=False).logits, atol=ATOL, rtol=0)
        frames[backend] = counter.frame_count
    assert frames["npugraph"] <= frames["aot_eager"], frames


def _train_step(model, inputs, labels):
    loss = model(**inputs, labels=labels).loss
    loss.backward()
    return loss.detach()


@pytest.mark.parametrize("foreach", [False, True])
def test_compiled_adamw_step_on_a_decoder(foreach, zoo):
    """`torch.compile(opt.step)` for AdamW (foreach=True is torch's default on an NPU, whose device
    type torch lists among the foreach devices): parameters and the optimizer's state against an
    eager AdamW fed the same gradients, over three steps."""
    m = zoo["qwen2"]
    eager_model, compiled_model = m.build().train(), m.build().train()
    inputs = m.inputs(*m.sizes[0])
    options = {"lr": 1e-2, "weight_decay": 0.1, "foreach": foreach}
    eager_opt = torch.optim.AdamW(eager_model.parameters(), **options)
    compiled_opt = torch.optim.AdamW(compiled_model.parameters(), **options)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("npugraph")
    step = torch.compile(compiled_opt.step, backend=counter)
    for _ in range(3):
        for model, run in ((eager_model, eager_opt.step), (compiled_model, step)):
            model.zero_grad()
            _train_step(model, inputs, m.labels(inputs))
            run()
    assert counter.frame_count >= 1
    for (name, p), q in zip(compiled_model.named_parameters(), eager_model.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-5, rtol=1e-5, msg=lambda s, name=name: f"{name}: {s}")
        for key in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(compiled_opt.state[p][key], eager_opt.state[q][key], atol=1e-6, rtol=1e-5)


BF16_EPS = 2.0 ** -7   # bf16 keeps 8 significant bits


def _autocast_train(run, model, m):
    inputs = m.inputs(*m.sizes[0])
    model.zero_grad()
    with torch.autocast("cpu", torch.bfloat16):
        loss = run(**inputs, labels=m.labels(inputs)).loss
    loss.backward()
    return [loss.detach().float()] + [p.grad.float() for p in model.parameters()]


def test_bf16_autocast_training_step(zoo):
    """A training step under `torch.autocast("cpu", torch.bfloat16)` (loss and every gradient).

    Tolerance: the compiled and eager steps round differently only where a fused CPU kernel and its
    GE form order their bf16 roundings differently: a few bf16 eps (2**-7) of each tensor's
    magnitude. The bound is 4 eps of the tensor's max |value|, or twice aot_eager's own departure
    from eager if that is larger (the second oracle: aot_eager runs eager's kernels on AOT's graph)."""
    m = zoo["llama"]
    model = m.build().train()
    expected = _autocast_train(model, model, m)
    departures = {}
    for backend in ("aot_eager", "npugraph"):
        torch._dynamo.reset()
        model = m.build().train()
        actual = _autocast_train(torch.compile(model, backend=backend), model, m)
        departures[backend] = [float((a - e).abs().max()) for a, e in zip(actual, expected, strict=True)]
    names = ["loss"] + [name for name, _ in m.build().named_parameters()]
    for name, e, npu, aot in zip(names, expected, departures["npugraph"], departures["aot_eager"], strict=True):
        bound = max(4 * BF16_EPS * float(e.abs().max()), 2 * aot)
        assert npu <= bound, f"{name}: npugraph off eager by {npu:.3g} (bound {bound:.3g}, aot_eager {aot:.3g})"


def test_gradient_checkpointing_training_step(zoo):
    """`gradient_checkpointing_enable()` on a decoder (GPT-2's checkpointed blocks; its dropouts set to
    0 so eager and compiled can be compared, tests/test_checkpoint_rng.py covers dropout inside
    checkpointing): loss and every gradient against eager."""
    m = zoo["gpt2"]
    inputs = m.inputs(*m.sizes[0])
    results = []
    for compile_it in (False, True):
        model = m.build()
        model.config.resid_pdrop = model.config.embd_pdrop = model.config.attn_pdrop = 0.0
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        model.train()
        model.gradient_checkpointing_enable()
        run = model
        if compile_it:
            torch._dynamo.reset()
            run = torch.compile(model, backend="npugraph")
        loss = _train_step(run, inputs, m.labels(inputs))
        results.append([loss] + [p.grad for p in model.parameters()])
    for got, want in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(got, want, atol=ATOL, rtol=1e-4)


def _mamba():
    from transformers import MambaConfig, MambaForCausalLM
    torch.manual_seed(0)
    return MambaForCausalLM(MambaConfig(vocab_size=96, hidden_size=16, state_size=4, num_hidden_layers=2,
                                        expand=2, conv_kernel=4, use_cache=False))


@pytest.mark.parametrize("dynamic", [False, True])
def test_mamba_forward_and_backward(dynamic, vocab):
    """A state-space model (MambaForCausalLM; on a CPU its sequential-scan path: softplus of the time
    step, a depthwise causal conv, the selective scan as a Python loop over the length, which dynamo
    unrolls, so the length is static): logits, loss and every gradient against eager; dynamic=True
    over two batch sizes, the second compiling nothing new."""
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("npugraph")
    frames = []
    for batch in (2, 3) if dynamic else (2,):
        ids = _tokens(vocab, batch, 6, seed=batch)
        results = []
        for compiled in (False, True):
            model = _mamba().train()
            run = torch.compile(model, backend=counter, dynamic=dynamic) if compiled else model
            out = run(input_ids=ids, labels=ids)
            out.loss.backward()
            results.append([out.logits.detach(), out.loss.detach()] + [p.grad for p in model.parameters()])
        for got, want in zip(results[1], results[0], strict=True):
            torch.testing.assert_close(got, want, atol=ATOL, rtol=1e-4)
        frames.append(counter.frame_count)
    assert frames[-1] == frames[0], f"the second batch size recompiled: frames after each call {frames}"
