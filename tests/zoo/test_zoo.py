"""The model zoo through `torch.compile(backend="npugraph")` with default options, against eager.

Pass: fp32 max abs error <= 1e-4 (outputs and gradients); with dynamic=True, no recompile after
the first call when only batch/sequence size changes (dynamo's frame counter). Models and sizes
are in conftest.py (the `zoo` fixture). A case that fails only for a missing GE kernel is xfail(strict=True) naming the
GE type, so it turns into an error when the kernel lands.
"""
import pytest
import torch
import torch._dynamo.testing
import torch.nn.functional as F

import op_plugin  # noqa: F401  (the npugraph backend)

ATOL = 1e-4
# model -> {mode: reason} for cases known to fail; strict, so a fix shows up as an error.
KNOWN: dict[str, dict[str, str]] = {}


def _first(out):
    if torch.is_tensor(out):
        return out
    return out[0]


def _xfail_if_known(request, name, mode):
    reason = KNOWN.get(name, {}).get(mode)
    if reason:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


@pytest.mark.zoo_models
def test_eager_output_is_not_degenerate(name, zoo):
    """The oracle has to be able to fail: an output much smaller than ATOL (random-weight CNNs whose
    activations shrink layer by layer) would pass any comparison."""
    m = zoo[name]
    batch, length = m.sizes[0]
    with torch.no_grad():
        out = _first(m.build()(**m.inputs(batch, length)))
    assert out.std() >= 100 * ATOL, f"{name}: eager output std {out.std():.3g} is too small to compare at {ATOL}"


@pytest.mark.zoo_models
def test_inference_static(name, request, zoo):
    _xfail_if_known(request, name, "static")
    m = zoo[name]
    model = m.build()
    counter = torch._dynamo.testing.CompileCounterWithBackend("npugraph")
    compiled = torch.compile(model, backend=counter)
    batch, length = m.sizes[0]
    inputs = m.inputs(batch, length)
    with torch.no_grad():
        expected, actual = _first(model(**inputs)), _first(compiled(**inputs))
    torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0)
    assert counter.frame_count >= 1


@pytest.mark.zoo_models
def test_inference_dynamic(name, request, zoo):
    _xfail_if_known(request, name, "dynamic")
    m = zoo[name]
    model = m.build()
    counter = torch._dynamo.testing.CompileCounterWithBackend("npugraph")
    compiled = torch.compile(model, backend=counter, dynamic=True)
    frames_after_first = None
    with torch.no_grad():
        for batch, length in m.sizes:
            inputs = m.inputs(batch, length)
            expected, actual = _first(model(**inputs)), _first(compiled(**inputs))
            torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0,
                                       msg=lambda s, size=(batch, length): f"{size}: {s}")
            if frames_after_first is None:
                frames_after_first = counter.frame_count
    assert counter.frame_count == frames_after_first, (
        f"recompiled: {counter.frame_count - frames_after_first} more graph(s) after the first call")


def _loss(model, inputs, labels):
    out = model(**inputs)
    if hasattr(out, "logits"):
        logits = out.logits
    else:  # no head: the first token's (or the pooled image's) first features as class scores
        features = out[0]
        features = features.mean((2, 3)) if features.dim() == 4 else features
        logits = (features[:, 0] if features.dim() == 3 else features)[..., :3]
    if logits.dim() == 3:
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())
    return F.cross_entropy(logits, labels)


def _train_mode_without_randomness(model):
    """model.train() (batch statistics in BatchNorm, running statistics updated), with every dropout,
    drop-path and layer-drop probability set to 0: eager and compiled cannot share a random stream."""
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
        for attr, value in vars(module).items():
            if "drop" in attr and isinstance(value, float):
                setattr(module, attr, 0.0)
    return model


@pytest.mark.zoo_models(trainable=True)
def test_training_step(name, request, zoo):
    """Forward + cross-entropy + backward in train mode: loss, every parameter's gradient and every
    buffer (BatchNorm running statistics) against eager."""
    _xfail_if_known(request, name, "train")
    m = zoo[name]
    model, reference = (_train_mode_without_randomness(m.build()) for _ in range(2))
    batch, length = m.sizes[0]
    inputs = m.inputs(batch, length)
    labels = m.labels(inputs)
    loss = _loss(torch.compile(model, backend="npugraph"), inputs, labels)
    loss.backward()
    expected = _loss(reference, inputs, labels)
    expected.backward()
    torch.testing.assert_close(loss, expected, atol=ATOL, rtol=0)
    for (bname, b), c in zip(model.named_buffers(), reference.buffers(), strict=True):
        torch.testing.assert_close(b, c, atol=ATOL, rtol=0, msg=lambda s, bname=bname: f"buffer {bname}: {s}")
    for (pname, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        if q.grad is None:
            assert p.grad is None or not p.grad.any(), pname
            continue
        torch.testing.assert_close(p.grad, q.grad, atol=ATOL, rtol=0,
                                   msg=lambda s, pname=pname: f"grad of {pname}: {s}")


def test_length_equal_to_head_dim_does_not_recompile(zoo):
    """With TorchAir's view optimisation (off by default in npugraph) a first length equal to the head
    dim specialises the length; tests/test_torchair_gaps.py keeps that case as a strict xfail."""
    m = zoo["gpt2"]
    model = m.build()
    counter = torch._dynamo.testing.CompileCounterWithBackend("npugraph")
    compiled = torch.compile(model, backend=counter, dynamic=True)
    with torch.no_grad():
        compiled(**m.inputs(2, 8))  # head dim is 8
        first = counter.frame_count
        compiled(**m.inputs(3, 12))
    assert counter.frame_count == first
