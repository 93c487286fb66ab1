"""The zoo's recent tier (tests/zoo/recent_models.py: `RECENT`) through test_zoo.py's and
test_zoo_decode.py's own test bodies: eager output not degenerate, inference static and dynamic
(three sizes, no recompile), a training step (loss, gradients and buffers), every decoder's
KV-cache decode steps, and Whisper's `generate()`; fp32, max abs error <= 1e-4 against eager.

`make zoo` runs this module (tests/zoo); `make zoo-npu` lists its files and leaves it out (CI time).
CI's budget for the module is 2.5 minutes with `-n 2`, and torch's own tracing costs 5-30 s a case
(docs/model-zoo.md), so CI runs every model static and, per `IN_CI`, the other modes for the models
whose family has something there the first zoo does not exercise. OP_PLUGIN_ZOO_RECENT_ALL=1 runs
every case (each passes: docs/model-zoo.md); without it the others are skipped, saying so. A case
known to fail is xfail(strict=True) in KNOWN with its cause, so a fix shows up as an error.
"""
import os

import pytest
import torch
import torch._dynamo.testing

import op_plugin  # noqa: F401  (the npugraph backend)
from tests.zoo import test_zoo, test_zoo_decode
from tests.zoo.conftest import _moved
from tests.zoo.recent_models import RECENT

ATOL = test_zoo.ATOL
NEW_TOKENS = 5
# model -> {mode: reason} ("static", "dynamic", "train", "decode", "generate") for cases known to fail
KNOWN: dict[str, dict[str, str]] = {}
# mode -> the models CI runs it for ("static": every model); docs/model-zoo.md says why these
IN_CI: dict[str, set[str]] = {
    "train": {"deepseek_v3", "gemma2", "swin", "sd_vae"},
    "dynamic": {"deepseek_v3"},
    "decode": set(),
    "generate": {"whisper"},
}
RUN_ALL = os.environ.get("OP_PLUGIN_ZOO_RECENT_ALL") == "1"

_NAMES = sorted(RECENT)
_TRAINABLE = sorted(n for n, m in RECENT.items() if m.labels is not None)
_DECODERS = sorted(n for n, m in RECENT.items() if m.family == "decoder")


@pytest.fixture(scope="session")
def recent(zoo_device):
    if zoo_device == "cpu":
        return RECENT
    return {name: _moved(model, zoo_device) for name, model in RECENT.items()}


def _skip_or_xfail(request, name, mode):
    if not RUN_ALL and mode in IN_CI and name not in IN_CI[mode]:
        pytest.skip(f"{name} {mode}: over CI's time budget for this module; OP_PLUGIN_ZOO_RECENT_ALL=1 runs it")
    reason = KNOWN.get(name, {}).get(mode)
    if reason:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


@pytest.mark.parametrize("name", _NAMES)
def test_eager_output_is_not_degenerate(name, recent):
    test_zoo.test_eager_output_is_not_degenerate(name, recent)


@pytest.mark.parametrize("name", _NAMES)
def test_inference_static(name, request, recent):
    _skip_or_xfail(request, name, "static")
    test_zoo.test_inference_static(name, request, recent)


@pytest.mark.parametrize("name", _NAMES)
def test_inference_dynamic(name, request, recent):
    _skip_or_xfail(request, name, "dynamic")
    test_zoo.test_inference_dynamic(name, request, recent)


@pytest.mark.parametrize("name", _TRAINABLE)
def test_training_step(name, request, recent):
    _skip_or_xfail(request, name, "train")
    test_zoo.test_training_step(name, request, recent)


@pytest.mark.parametrize("name", _DECODERS)
def test_decode_steps_match_eager(name, request, recent, vocab, zoo_device):
    _skip_or_xfail(request, name, "decode")
    test_zoo_decode.test_decode_steps_match_eager(name, recent, vocab, zoo_device)


def _generate(model, features):
    with torch.no_grad():
        return model.generate(input_features=features, max_new_tokens=NEW_TOKENS, do_sample=False,
                              output_scores=True, return_dict_in_generate=True)


def test_whisper_generate_matches_eager(request, recent):
    """Whisper's own generate() (encoder once, then the decoder token by token with its
    EncoderDecoderCache) with the model's forward compiled dynamic: the same tokens as eager and
    every step's scores within ATOL."""
    _skip_or_xfail(request, "whisper", "generate")
    m = recent["whisper"]
    model = m.build()
    features = m.inputs(2, 4)["input_features"]
    expected = _generate(model, features)
    counter = torch._dynamo.testing.CompileCounterWithBackend("npugraph")
    eager_forward = model.forward
    model.forward = torch.compile(eager_forward, backend=counter, dynamic=True)
    try:
        actual = _generate(model, features)
    finally:
        model.forward = eager_forward
    assert counter.frame_count >= 1
    torch.testing.assert_close(actual.sequences, expected.sequences, rtol=0, atol=0)
    assert len(actual.scores) == NEW_TOKENS
    for step, (a, e) in enumerate(zip(actual.scores, expected.scores, strict=True)):
        torch.testing.assert_close(a, e, atol=ATOL, rtol=0, msg=lambda s, step=step: f"step {step}: {s}")
