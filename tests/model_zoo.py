"""Real models built from configs (no weights downloaded), each with one training step to profile:
torchvision, timm, Hugging Face transformers (MoE included), diffusers, and the setups around them
(DDP, an inline loss, a layer called twice). ``ZOO[name]()`` returns ``(model, step)``, or raises
ImportError where its library is not installed. Sizes are tiny: every step runs in seconds on a CPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

Maker = Callable[[], "tuple[nn.Module, Callable[[], Any]]"]


def _image_step(model: nn.Module, size: int, classes: int = 10, batch: int = 2) -> Callable[[], Any]:
    x = torch.randn(batch, 3, size, size)
    y = torch.arange(batch) % classes
    return lambda: nn.functional.cross_entropy(model(x), y).backward()


def torchvision_model(name: str, size: int, **kwargs: Any) -> Maker:
    def make() -> tuple[nn.Module, Callable[[], Any]]:
        import torchvision

        model = getattr(torchvision.models, name)(weights=None, num_classes=10, **kwargs)
        return model, _image_step(model, size)

    return make


def timm_model(name: str, size: int, **kwargs: Any) -> Maker:
    def make() -> tuple[nn.Module, Callable[[], Any]]:
        import timm

        model = timm.create_model(name, pretrained=False, num_classes=10, **kwargs)
        return model, _image_step(model, size)

    return make


def _causal_lm(model: nn.Module, vocab: int = 128, seq: int = 16) -> Callable[[], Any]:
    ids = torch.randint(0, vocab, (2, seq), generator=torch.Generator().manual_seed(0))
    return lambda: model(input_ids=ids, labels=ids, use_cache=False).loss.backward()


def hf_model(kind: str, experts: str | None = None) -> Maker:
    def make() -> tuple[nn.Module, Callable[[], Any]]:
        import transformers as tf

        ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
        small = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}  # fmt: skip
        model: nn.Module
        if kind == "llama":
            model = tf.LlamaForCausalLM(tf.LlamaConfig(**small))
            return model, _causal_lm(model)
        if kind == "gemma2":
            model = tf.Gemma2ForCausalLM(tf.Gemma2Config(**small, head_dim=16))
            return model, _causal_lm(model)
        if kind == "mixtral":
            cfg = tf.MixtralConfig(**small, num_local_experts=4, num_experts_per_tok=2)
            if experts:
                cfg._experts_implementation = experts
            model = tf.MixtralForCausalLM(cfg)
            return model, _causal_lm(model)
        if kind == "qwen2-moe":
            cfg = tf.Qwen2MoeConfig(**small, moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=4,
                                    num_experts_per_tok=2)  # fmt: skip
            if experts:
                cfg._experts_implementation = experts
            model = tf.Qwen2MoeForCausalLM(cfg)
            return model, _causal_lm(model)
        if kind == "gpt2":
            model = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64))
            return model, _causal_lm(model)
        if kind == "gpt2-generate":  # 48 tokens, one at a time, with its growing KV cache
            model = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                                                     pad_token_id=0))  # fmt: skip
            prompt = ids[:, :8]
            return model, lambda: model.generate(prompt, max_new_tokens=48, min_new_tokens=48, do_sample=False)
        if kind == "gpt-neox":
            model = tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                                           num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64))  # fmt: skip
            mask = torch.ones(2, 16, dtype=torch.long)
            mask[1, 12:] = 0
            return model, lambda: model(input_ids=ids, attention_mask=mask, labels=ids).loss.backward()
        if kind == "mamba2":
            model = tf.Mamba2ForCausalLM(tf.Mamba2Config(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_heads=4,
                                                         head_dim=32, state_size=16, n_groups=1, chunk_size=8))  # fmt: skip
            return model, _causal_lm(model)
        if kind == "falcon-mamba":
            model = tf.FalconMambaForCausalLM(tf.FalconMambaConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2,
                                                                   state_size=8, intermediate_size=128))  # fmt: skip
            return model, _causal_lm(model)
        if kind == "bert":
            model = tf.BertForMaskedLM(tf.BertConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                     intermediate_size=128, max_position_embeddings=64))  # fmt: skip
            return model, lambda: model(input_ids=ids, labels=ids).loss.backward()
        if kind == "roberta-cls":  # its loss is a CrossEntropyLoss() made inside forward
            model = tf.RobertaForSequenceClassification(tf.RobertaConfig(
                vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                max_position_embeddings=64, num_labels=3))  # fmt: skip
            labels = torch.tensor([0, 2])
            return model, lambda: model(input_ids=ids, labels=labels).loss.backward()
        if kind == "modernbert":
            model = tf.ModernBertForMaskedLM(tf.ModernBertConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                                                 num_hidden_layers=2, num_attention_heads=4,
                                                                 max_position_embeddings=64, pad_token_id=0))  # fmt: skip
            return model, lambda: model(input_ids=ids, labels=ids).loss.backward()
        if kind == "t5":
            model = tf.T5ForConditionalGeneration(tf.T5Config(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                                              num_heads=4, decoder_start_token_id=0))  # fmt: skip
            return model, lambda: model(input_ids=ids, labels=ids).loss.backward()
        if kind == "whisper":
            model = tf.WhisperForConditionalGeneration(tf.WhisperConfig(
                vocab_size=128, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16, max_source_positions=32,
                max_target_positions=32, decoder_start_token_id=1, pad_token_id=0, bos_token_id=1, eos_token_id=2))  # fmt: skip
            feats, labels = torch.randn(2, 16, 64), torch.randint(3, 128, (2, 8))
            return model, lambda: model(input_features=feats, labels=labels).loss.backward()
        if kind == "clip":
            model = tf.CLIPModel(tf.CLIPConfig(
                text_config={"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "max_position_embeddings": 16, "bos_token_id": 0, "eos_token_id": 1},
                vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                               "image_size": 32, "patch_size": 8}))  # fmt: skip
            px = torch.randn(2, 3, 32, 32)
            return model, lambda: model(input_ids=ids[:, :8], pixel_values=px, return_loss=True).loss.backward()
        if kind == "llava":
            vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                      "image_size": 32, "patch_size": 8}  # fmt: skip
            text = {**small, "vocab_size": 160}
            cfg = tf.LlavaConfig(vision_config=tf.CLIPVisionConfig(**vision), text_config=tf.LlamaConfig(**text),
                                 image_token_index=150, projector_hidden_act="gelu")  # fmt: skip
            model = tf.LlavaForConditionalGeneration(cfg)
            tokens = torch.randint(0, 128, (2, 20), generator=torch.Generator().manual_seed(1))
            tokens[:, :16] = 150  # one image of 16 patches per example
            px = torch.randn(2, 3, 32, 32)
            return model, lambda: model(input_ids=tokens, pixel_values=px, labels=tokens).loss.backward()
        raise ValueError(kind)

    return make


def unet() -> tuple[nn.Module, Callable[[], Any]]:
    from diffusers import UNet2DConditionModel

    model = UNet2DConditionModel(sample_size=16, in_channels=4, out_channels=4, block_out_channels=(32, 64), layers_per_block=1,
                                 down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                 up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                                 norm_num_groups=16, attention_head_dim=8)  # fmt: skip
    x, t, ctx = torch.randn(2, 4, 16, 16), torch.tensor([10, 500]), torch.randn(2, 8, 32)
    return model, lambda: nn.functional.mse_loss(model(x, t, encoder_hidden_states=ctx).sample, x).backward()


def vae() -> tuple[nn.Module, Callable[[], Any]]:
    from diffusers import AutoencoderKL

    model = AutoencoderKL(block_out_channels=(32, 64), down_block_types=("DownEncoderBlock2D",) * 2,
                          up_block_types=("UpDecoderBlock2D",) * 2, latent_channels=4, norm_num_groups=16, layers_per_block=1)  # fmt: skip
    x = torch.randn(2, 3, 32, 32)
    return model, lambda: nn.functional.mse_loss(model(x).sample, x).backward()


class ConvTwice(nn.Module):
    """One convolution called twice: its first call's input needs no gradient, its second's does."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(torch.relu(self.conv(x)))


def conv_twice() -> tuple[nn.Module, Callable[[], Any]]:
    model = ConvTwice()
    x = torch.randn(2, 4, 8, 8)
    return model, lambda: model(x).sum().backward()


class Bags(nn.Module):
    def __init__(self, weighted: bool) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(50, 16, mode="sum")
        self.head = nn.Linear(16, 4)
        self.weighted = weighted

    def forward(self, idx: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return self.head(self.bag(idx, offsets, per_sample_weights=weights if self.weighted else None))


def embedding_bag(weighted: bool) -> Maker:
    def make() -> tuple[nn.Module, Callable[[], Any]]:
        model = Bags(weighted)
        idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 7, 7])
        offsets, weights = torch.tensor([0, 4, 7]), torch.rand(10, requires_grad=True)
        return model, lambda: model(idx, offsets, weights).sum().backward()

    return make


def ddp() -> tuple[nn.Module, Callable[[], Any]]:
    """A DistributedDataParallel model on a one-process gloo group (made here if none is)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29400 + os.getpid() % 500))
        dist.init_process_group("gloo", rank=0, world_size=1)
    net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
    model = nn.parallel.DistributedDataParallel(net)
    x, y = torch.randn(8, 32), torch.arange(8) % 8
    return model, lambda: nn.functional.cross_entropy(model(x), y).backward()


ZOO: dict[str, Maker] = {
    "ResNet-18": torchvision_model("resnet18", 64),
    "MobileNetV3-S": torchvision_model("mobilenet_v3_small", 64),
    "EfficientNet-B0": torchvision_model("efficientnet_b0", 64),
    "ConvNeXt-T": torchvision_model("convnext_tiny", 64),
    "Swin-T": torchvision_model("swin_t", 64),
    "ViT-B/16": torchvision_model("vit_b_16", 64, image_size=64),
    "LeViT": timm_model("levit_128s", 224),
    "CoaT": timm_model("coat_lite_tiny", 64, img_size=64),
    "CoaT-shared": timm_model("coat_tiny", 64, img_size=64),
    "MobileViT": timm_model("mobilevit_xxs", 64),
    "DeiT": timm_model("deit_tiny_patch16_224", 64, img_size=64),
    "RegNet": timm_model("regnetx_002", 64),
    "GhostNet": timm_model("ghostnet_100", 64),
    "PoolFormer": timm_model("poolformer_s12", 64),
    "Llama": hf_model("llama"),
    "Gemma2": hf_model("gemma2"),
    "Mixtral": hf_model("mixtral"),
    "Mixtral-eager": hf_model("mixtral", "eager"),
    "Qwen2-MoE": hf_model("qwen2-moe"),
    "Qwen2-MoE-eager": hf_model("qwen2-moe", "eager"),
    "GPT-2": hf_model("gpt2"),
    "GPT-2-generate": hf_model("gpt2-generate"),
    "GPT-NeoX": hf_model("gpt-neox"),
    "Mamba2": hf_model("mamba2"),
    "FalconMamba": hf_model("falcon-mamba"),
    "BERT": hf_model("bert"),
    "RoBERTa-cls": hf_model("roberta-cls"),
    "ModernBERT": hf_model("modernbert"),
    "T5": hf_model("t5"),
    "Whisper": hf_model("whisper"),
    "CLIP": hf_model("clip"),
    "Llava": hf_model("llava"),
    "UNet2D": unet,
    "AutoencoderKL": vae,
    "DDP": ddp,
    "ConvTwice": conv_twice,
    "EmbeddingBag": embedding_bag(False),
    "EmbeddingBag-weighted": embedding_bag(True),
}
