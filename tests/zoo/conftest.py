"""The zoo tier runs only where its extra is installed (`pip install -e .[zoo]`): transformers.

The zoo's models: public model code from `transformers`, small configs, random weights.

Each `ZooModel` builds its module (seeded, eval mode, fp32) and its inputs for a batch size and a
sequence length (or image count), with the library's defaults: SDPA attention, attention masks
with padding, causal masks and position ids as the library builds them. Nothing is downloaded.

The test modules get them from here, never by importing a module of tests/: the `zoo` fixture
(name -> ZooModel), `vocab`, and `@pytest.mark.zoo_models` (optionally `trainable=True`), which
parametrizes a test's `name` over the zoo's models, sorted. Tests that build their own modules and
inputs (the torch_npu-op graphs, test_npu_*.py) move them to `zoo_device` ("cpu" or "npu", the
--zoo-device value) and run their ACL-graph-mode calls inside `aclgraph_calls()`.
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

pytest.importorskip("transformers", reason="the zoo extra is not installed (pip install -e .[zoo])")


@dataclass(frozen=True)
class ZooModel:
    name: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[int, int], dict]   # (batch, length) -> forward kwargs
    sizes: tuple[tuple[int, int], ...]   # three (batch, length) pairs for the dynamic run
    family: str                          # "decoder", "encoder", "encoder-decoder", "vision", "audio", "cnn"
    labels: Callable[[dict], torch.Tensor] | None = None  # for the training step


def _seeded(fn):
    def build():
        torch.manual_seed(0)
        return fn().eval()
    return build


def _bn_calibrated(fn, size):
    """Seeded, with BatchNorm running statistics measured on random images (as training leaves them).

    transformers initialises conv weights (and EfficientNet's BatchNorm scales) with std 0.02 and the
    running statistics to (0, 1), so in eval mode every block shrinks its input: MobileNetV2's and
    EfficientNet's outputs come out below 1e-20 and a comparison at atol 1e-4 could not fail. Unit scales
    and measured statistics keep each layer's output near unit scale.
    """
    def build():
        torch.manual_seed(0)
        model = fn()
        norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        for norm in norms:
            norm.reset_parameters()  # scale 1, shift 0, statistics (0, 1)
            norm.momentum = None  # cumulative average over the calibration batches
        model.train()  # each BatchNorm normalises with its batch's statistics and records them
        with torch.no_grad():
            model(pixel_values=torch.randn(8, 3, size, size))
        return model.eval()
    return build


VOCAB = 96


def _token_inputs(batch, length, *, pad=True, positions=False):
    g = torch.Generator().manual_seed(batch * 1000 + length)
    ids = torch.randint(0, VOCAB, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.long)
    if pad:
        mask[0, length - 2:] = 0   # right padding on the first row
    out = {"input_ids": ids, "attention_mask": mask}
    if positions:
        out["position_ids"] = torch.arange(length).expand(batch, length)
    return out


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4))


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))


def _qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM
    return Qwen2ForCausalLM(Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))


def _bert():
    from transformers import BertConfig, BertForSequenceClassification
    return BertForSequenceClassification(BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                                    num_attention_heads=4, intermediate_size=64,
                                                    max_position_embeddings=64, num_labels=3))


def _distilbert():
    from transformers import DistilBertConfig, DistilBertModel
    return DistilBertModel(DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                            max_position_embeddings=64))


def _t5_encoder():
    from transformers import T5Config, T5EncoderModel
    return T5EncoderModel(T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4))


def _vit():
    from transformers import ViTConfig, ViTModel
    return ViTModel(ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                              num_attention_heads=4, intermediate_size=64), add_pooling_layer=True)


def _wav2vec2():
    from transformers import Wav2Vec2Config, Wav2Vec2Model
    return Wav2Vec2Model(Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                                        conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                                        num_conv_pos_embedding_groups=4, do_stable_layer_norm=False))


def _whisper_encoder():
    from transformers import WhisperConfig, WhisperModel
    config = WhisperConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
                           decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16,
                           max_source_positions=16, max_target_positions=16, pad_token_id=0, bos_token_id=1,
                           eos_token_id=2, decoder_start_token_id=1)
    return WhisperModel(config).get_encoder()


def _mel(batch, _length):
    """Whisper's encoder takes exactly 2 * max_source_positions frames: only the batch varies."""
    g = torch.Generator().manual_seed(batch)
    return {"input_features": torch.randn(batch, 16, 32, generator=g)}


def _resnet():
    from transformers import ResNetConfig, ResNetModel
    return ResNetModel(ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic"))


def _mobilenet_v2():
    from transformers import MobileNetV2Config, MobileNetV2Model
    return MobileNetV2Model(MobileNetV2Config(image_size=32, depth_multiplier=0.25))


def _efficientnet():
    from transformers import EfficientNetConfig, EfficientNetModel
    return EfficientNetModel(EfficientNetConfig(image_size=32, width_coefficient=0.1, depth_coefficient=0.1,
                                                hidden_dim=128))  # the top conv's width: round_filters(1280 * 0.1)


def _pp_lcnet():
    """The MobileNetV3 family (hard-swish, squeeze-excitation with hard-sigmoid, depthwise convs) as
    transformers ships it: torchvision's MobileNetV3 cannot load beside torch 2.13.0+cpu
    (docs/npu-faithful-lowering.md, "The model zoo")."""
    from transformers import PPLCNetConfig, PPLCNetForImageClassification
    # (kernel, in, out, stride, squeeze-excitation) per block; five stages as PP-LCNet requires
    blocks = [[[3, 8, 8, 1, False]], [[3, 8, 16, 2, False]], [[3, 16, 16, 2, False]],
              [[3, 16, 32, 2, False], [5, 32, 32, 1, False]], [[5, 32, 32, 2, True], [5, 32, 32, 1, True]]]
    return PPLCNetForImageClassification(PPLCNetConfig(block_configs=blocks, stem_channels=8, class_expand=32,
                                                       num_labels=0))  # no head: the pooled features


def _convnext():
    from transformers import ConvNextConfig, ConvNextModel
    return ConvNextModel(ConvNextConfig(hidden_sizes=[8, 16], depths=[1, 1], num_stages=2))


# Breadth: architectures whose lowering needs op_plugin's converters or corrections beyond the above
# (BART, T5-like relative attention: the view optimisation's recompiles; XLNet: aten.eye; BEiT: clone
# to channels_last; BiT: batch norm without running statistics; Mistral: sliding-window attention).

def _bart():
    from transformers import BartConfig, BartModel
    return BartModel(BartConfig(vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1,
                                encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                                decoder_ffn_dim=64, max_position_embeddings=64))


def _xlnet():
    from transformers import XLNetConfig, XLNetModel
    return XLNetModel(XLNetConfig(vocab_size=VOCAB, d_model=32, n_layer=2, n_head=4, d_inner=64))


def _deberta_v2():
    from transformers import DebertaV2Config, DebertaV2Model
    return DebertaV2Model(DebertaV2Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                          intermediate_size=64, max_position_embeddings=64, relative_attention=True,
                                          position_buckets=16, pos_att_type=["p2c", "c2p"]))


def _mistral():
    from transformers import MistralConfig, MistralForCausalLM
    return MistralForCausalLM(MistralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                            sliding_window=4))


def _mixtral_config():
    from transformers import MixtralConfig
    return MixtralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                         max_position_embeddings=64)


def _mixtral():
    """Mixture of experts with transformers' default experts implementation ("grouped_mm": histc and
    grouped matmuls, float32 through transformers' grouped_mm_fallback op)."""
    from transformers import MixtralForCausalLM
    return MixtralForCausalLM(_mixtral_config())


def _mixtral_eager_experts():
    """The same with transformers' "eager" experts loop (F.one_hot routing, data-dependent graph breaks)."""
    from transformers import MixtralForCausalLM
    return MixtralForCausalLM._from_config(_mixtral_config(), experts_implementation="eager")


def _qwen2_moe():
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM
    return Qwen2MoeForCausalLM(Qwen2MoeConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, moe_intermediate_size=32,
        shared_expert_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        num_experts=4, num_experts_per_tok=2, max_position_embeddings=64))


def _beit():
    from transformers import BeitConfig, BeitModel
    return BeitModel(BeitConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64, use_relative_position_bias=True))


def _bit():
    from transformers import BitConfig, BitModel
    return BitModel(BitConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="preactivation",
                              num_groups=4))


def _images(size):
    def inputs(batch, _length):
        g = torch.Generator().manual_seed(batch)
        return {"pixel_values": torch.randn(batch, 3, size, size, generator=g)}
    return inputs


def _audio(batch, length):
    g = torch.Generator().manual_seed(batch * 1000 + length)
    return {"input_values": torch.randn(batch, length, generator=g)}


def _lm_labels(inputs):
    return inputs["input_ids"]


def _class_labels(inputs):
    batch = next(iter(inputs.values())).shape[0]
    return torch.arange(batch) % 3


TEXT_SIZES = ((2, 6), (3, 10), (4, 14))
IMAGE_SIZES = ((2, 0), (3, 0), (4, 0))
# lengths equal to the head dim (8) and head count (4): TorchAir's view optimisation specialised them
HEAD_SIZES = ((2, 8), (3, 4), (4, 11))
AUDIO_SIZES = ((2, 400), (3, 560), (4, 720))

ZOO = {
    m.name: m for m in (
        ZooModel("gpt2", _seeded(_gpt2), _token_inputs, TEXT_SIZES, "decoder", _lm_labels),
        ZooModel("llama", _seeded(_llama), lambda b, s: _token_inputs(b, s, positions=True), TEXT_SIZES, "decoder",
                 _lm_labels),
        ZooModel("qwen2", _seeded(_qwen2), _token_inputs, TEXT_SIZES, "decoder", _lm_labels),
        ZooModel("bert", _seeded(_bert), _token_inputs, TEXT_SIZES, "encoder", _class_labels),
        ZooModel("distilbert", _seeded(_distilbert), _token_inputs, TEXT_SIZES, "encoder", _class_labels),
        ZooModel("t5_encoder", _seeded(_t5_encoder), _token_inputs, TEXT_SIZES, "encoder", _class_labels),
        ZooModel("vit", _seeded(_vit), _images(32), IMAGE_SIZES, "vision", _class_labels),
        ZooModel("wav2vec2", _seeded(_wav2vec2), _audio, AUDIO_SIZES, "audio"),
        ZooModel("whisper_encoder", _seeded(_whisper_encoder), _mel, IMAGE_SIZES, "audio"),
        ZooModel("resnet", _seeded(_resnet), _images(32), IMAGE_SIZES, "cnn", _class_labels),
        ZooModel("mobilenet_v2", _bn_calibrated(_mobilenet_v2, 32), _images(32), IMAGE_SIZES, "cnn", _class_labels),
        ZooModel("efficientnet", _bn_calibrated(_efficientnet, 32), _images(32), IMAGE_SIZES, "cnn", _class_labels),
        ZooModel("pp_lcnet", _bn_calibrated(_pp_lcnet, 64), _images(64), IMAGE_SIZES, "cnn", _class_labels),
        ZooModel("convnext", _seeded(_convnext), _images(32), IMAGE_SIZES, "cnn", _class_labels),
        ZooModel("bart", _seeded(_bart), _token_inputs, HEAD_SIZES, "encoder-decoder", _class_labels),
        ZooModel("xlnet", _seeded(_xlnet), _token_inputs, TEXT_SIZES, "encoder", _class_labels),
        ZooModel("deberta_v2", _seeded(_deberta_v2), _token_inputs, TEXT_SIZES, "encoder", _class_labels),
        ZooModel("mistral", _seeded(_mistral), _token_inputs, TEXT_SIZES, "decoder", _lm_labels),
        ZooModel("mixtral", _seeded(_mixtral), _token_inputs, TEXT_SIZES, "decoder", _lm_labels),
        ZooModel("qwen2_moe", _seeded(_qwen2_moe), _token_inputs, TEXT_SIZES, "decoder", _lm_labels),
        ZooModel("mixtral_eager_experts", _seeded(_mixtral_eager_experts), _token_inputs, TEXT_SIZES, "decoder",
                 _lm_labels),
        ZooModel("beit", _seeded(_beit), _images(32), IMAGE_SIZES, "vision", _class_labels),
        ZooModel("bit", _seeded(_bit), _images(32), IMAGE_SIZES, "cnn", _class_labels),
    )
}


def pytest_addoption(parser):
    parser.addoption("--zoo-device", default="cpu", choices=("cpu", "npu"),
                     help="the device the zoo's models and inputs live on: npu runs them on op_plugin's virtual NPU "
                          "(under `op-plugin run` or OP_PLUGIN_VIRTUAL_NPU=1; docs/virtual-npu.md), so eager is the "
                          "virtual NPU's eager and the graph runs on npu tensors")


def pytest_configure(config):
    config.addinivalue_line("markers", "zoo_models(trainable=False): run the test once per zoo model (its `name` "
                                       "argument), sorted; trainable=True: only the models with labels")


def pytest_generate_tests(metafunc):
    marker = metafunc.definition.get_closest_marker("zoo_models")
    if marker is not None:
        trainable = marker.kwargs.get("trainable", False)
        metafunc.parametrize("name", sorted(n for n, m in ZOO.items() if not trainable or m.labels is not None))


def _on(device: str, value):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {key: _on(device, item) for key, item in value.items()}
    return value


def _moved(model: ZooModel, device: str) -> ZooModel:
    """`model` with its module, inputs and labels on `device`."""
    return ZooModel(model.name, lambda: model.build().to(device), lambda b, n: _on(device, model.inputs(b, n)),
                    model.sizes, model.family,
                    None if model.labels is None else lambda inputs: model.labels(_on("cpu", inputs)).to(device))


@pytest.fixture(scope="session")
def zoo_device(request) -> str:
    """The --zoo-device value ("cpu" or "npu"), for tests that build their own modules and inputs."""
    device = request.config.getoption("--zoo-device")
    if device != "cpu" and not hasattr(torch, "npu"):
        pytest.fail("--zoo-device npu needs op_plugin's virtual NPU: run under `op-plugin run -- pytest ...` or "
                    "with OP_PLUGIN_VIRTUAL_NPU=1 (docs/virtual-npu.md)")
    return device


@pytest.fixture(scope="session")
def zoo(zoo_device) -> dict[str, ZooModel]:
    if zoo_device == "cpu":
        return ZOO
    return {name: _moved(model, zoo_device) for name, model in ZOO.items()}


@pytest.fixture
def aclgraph_calls(zoo_device, monkeypatch):
    """A context for the calls of a model compiled in an ACL-graph mode (npugraph's mode "aclgraph").

    On cpu tensors (a CPU host) the AOT graph runs on the reference kernels and says so with a UserWarning:
    the context is `pytest.warns(UserWarning)` and yields None. On npu tensors TorchAir captures into the
    virtual `torch.npu.NPUGraph` and replays it (docs/virtual-npu.md): the context fails on a "CPU host"
    warning and on no replay, and yields the list of replayed graphs (one entry per `NPUGraph.replay`)."""
    @contextlib.contextmanager
    def calls():
        if zoo_device == "cpu":
            with pytest.warns(UserWarning):  # a CPU host runs the AOT graph on the reference kernels
                yield None
            return
        from op_plugin._simulator.device.graphs import NPUGraph
        replays, replay = [], NPUGraph.replay

        def counted(graph, *args, **kwargs):
            replays.append(graph)
            return replay(graph, *args, **kwargs)

        with monkeypatch.context() as patch, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            patch.setattr(NPUGraph, "replay", counted)
            yield replays
        host = [str(w.message) for w in caught if "CPU host" in str(w.message)]
        assert not host, f"ACL-graph mode on npu tensors fell back to the CPU-host path: {host}"
        assert replays, "ACL-graph mode on npu tensors: no torch.npu.NPUGraph was replayed"
    return calls


@pytest.fixture(scope="session")
def vocab() -> int:
    return VOCAB
