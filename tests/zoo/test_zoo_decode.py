"""Token-by-token decoding with the library's KV cache: the step compiled, the prompt run eagerly.

The decoders' next-token step (`DynamicCache`, one new token per call, the cache growing) compiled
with npugraph and `dynamic=True` gives eager's logits at every step, and compiles no more graphs
than torch's own `aot_eager` backend on the same steps (dynamo's recompiles as the cache grows are
torch's; any extra one would be npugraph's). The tokens are fixed (teacher forcing) so a near tie in
an argmax cannot send the two runs down different paths. With --zoo-device npu the model and the
tokens live on the virtual NPU; the logits are compared on CPU.
"""
import pytest
import torch
import torch._dynamo.testing

import op_plugin  # noqa: F401  (the npugraph backend)

ATOL = 1e-4
PROMPT, TOTAL = 3, 10   # Mistral's sliding window is 4: the cache outgrows it while decoding


def _decode(model, step, tokens):
    from transformers import DynamicCache
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=tokens[:, :PROMPT], past_key_values=cache, use_cache=True)
        return [step(input_ids=tokens[:, i:i + 1], past_key_values=cache, use_cache=True).logits
                for i in range(PROMPT, tokens.shape[1])]


@pytest.mark.parametrize("name", ["gpt2", "llama", "qwen2", "mistral"])
def test_decode_steps_match_eager(name, zoo, vocab, zoo_device):
    model = zoo[name].build()
    tokens = torch.randint(0, vocab, (2, TOTAL), generator=torch.Generator().manual_seed(0)).to(zoo_device)
    expected = _decode(model, model, tokens)
    frames = {}
    for backend in ("aot_eager", "npugraph"):
        torch._dynamo.reset()
        counter = torch._dynamo.testing.CompileCounterWithBackend(backend)
        actual = _decode(model, torch.compile(model, backend=counter, dynamic=True), tokens)
        frames[backend] = counter.frame_count
        if backend == "npugraph":
            for step, (a, e) in enumerate(zip(actual, expected, strict=True)):
                assert a.device.type == zoo_device, f"step {step}: {a.device}"
                torch.testing.assert_close(a.cpu(), e.cpu(), atol=ATOL, rtol=0,
                                           msg=lambda s, step=step: f"step {step}: {s}")
    assert frames["npugraph"] <= frames["aot_eager"], frames
