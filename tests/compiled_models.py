"""Tiny models of the kinds people compile, for the compiled-model tests and benchmark: a CNN,
attention (``nn.MultiheadAttention`` followed by a Linear), encoder and decoder layers, a
Llama-style block written out (RMSNorm, rotary embeddings, causal attention, SwiGLU; no
``transformers``) and a ViT block (torchvision's). One width everywhere, so equal kernels are
compiled once across models."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

D, HEADS, HIDDEN, BATCH, SEQ = 16, 2, 32, 2, 4


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.block2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.block2(self.pool(self.block1(x)))
        return self.fc(x.mean((2, 3)))


class Block(nn.Module):
    """A pre-norm transformer block: attention then an MLP (the benchmark's transformer)."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.proj(nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(torch.relu(self.fc1(self.ln2(x))))


class Attention(nn.Module):
    """``nn.MultiheadAttention`` and the Linear after it (its backward matmuls were once lost)."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.fc = nn.Linear(D, D)

    def forward(self, x):
        return self.fc(self.attn(x, x, x, need_weights=False)[0])


class Decoder(nn.Module):
    """``nn.TransformerDecoderLayer`` attending to its own input as memory."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(D, HEADS, HIDDEN, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x, x)


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head_dim = D // HEADS
        self.q_proj, self.k_proj = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)
        self.v_proj, self.o_proj = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.outer(torch.arange(SEQ).float(), inv_freq)
        emb = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (proj(x).view(b, t, HEADS, self.head_dim).transpose(1, 2) for proj in (self.q_proj, self.k_proj, self.v_proj))
        q = q * self.cos + _rotate_half(q) * self.sin
        k = k * self.cos + _rotate_half(k) * self.sin
        out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, D))


class LlamaMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(D, HIDDEN, bias=False), nn.Linear(D, HIDDEN, bias=False)
        self.down_proj = nn.Linear(HIDDEN, D, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    """A Llama decoder layer as ``transformers`` writes it, without ``transformers``."""

    def __init__(self) -> None:
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(D), RMSNorm(D)
        self.self_attn = LlamaAttention()
        self.mlp = LlamaMLP()

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Tied(nn.Module):
    """Two layers sharing one weight (as a language model's embedding and output head do): the
    weight's two gradients are summed in the backward graph, where Inductor fuses the sum with a
    gradient matmul."""

    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(D)
        self.inner, self.outer = nn.Linear(D, D), nn.Linear(D, D)
        self.outer.weight = self.inner.weight

    def forward(self, x):
        return self.outer(torch.relu(self.inner(self.ln(x))))


def vit_block() -> nn.Module:
    from torchvision.models.vision_transformer import EncoderBlock

    return EncoderBlock(HEADS, D, HIDDEN, dropout=0.0, attention_dropout=0.0)


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], nn.Module]
    shape: tuple[int, ...]
    layers: tuple[str, ...]
    """Layers (relative to the model) with work of their own the profiler sees in forward and
    backward: matmuls, convolutions, attention."""


SEQUENCE = (BATCH, SEQ, D)
CASES = (
    Case("cnn", SmallCNN, (2, 3, 16, 16), ("block1.0", "block2.0", "fc")),
    Case("mha", Attention, SEQUENCE, ("attn", "fc")),
    Case("encoder", lambda: nn.TransformerEncoderLayer(D, HEADS, HIDDEN, dropout=0.0, batch_first=True), SEQUENCE,
         ("self_attn", "linear1", "linear2")),
    Case("decoder", Decoder, SEQUENCE, ("layer.self_attn", "layer.multihead_attn", "layer.linear1", "layer.linear2")),
    Case("llama", LlamaBlock, SEQUENCE, ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                         "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")),
    Case("vit", vit_block, SEQUENCE, ("self_attention", "mlp.0", "mlp.3")),
    Case("tied", Tied, SEQUENCE, ("inner", "outer")),
)  # fmt: skip
