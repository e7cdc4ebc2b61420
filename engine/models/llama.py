"""Our Llama-family decoder (SmolLM2, Llama 3, Mistral), over a flat ragged batch of tokens.

Per layer: ``h += o_proj(attn(rope(q), rope(k), v))`` on ``rmsnorm(h)``, then
``h += down(silu(gate(x)) * up(x))`` on ``rmsnorm(h)``. Q/K/V and gate/up are fused into one
matmul each (weights are loaded into slices of the fused matrices). Grouped-query attention:
query head ``j`` reads KV head ``j // (Hq / Hkv)``. Optional pieces used by Qwen: Q/K/V bias,
per-head RMSNorm on q and k before RoPE (Qwen3). The forward takes ``(T,)`` token ids and
positions and returns ``(T, hidden)``; the LM head runs only on the rows whose logits are asked.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from formcast.engine.attention.metadata import AttentionMetadata
from formcast.engine.attention.paged_op import paged_attention
from formcast.engine.models.config import ModelConfig
from formcast.engine.models.linear import LMHead, linear
from formcast.engine.models.rotary import RotaryEmbedding, apply_rotary


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight``, computed in float32 like transformers."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # one fused op for x * rsqrt(mean(x^2) + eps) (bit-identical to the spelled-out form)
        normed = F.rms_norm(x.float(), (x.shape[-1],), None, self.eps)
        return self.weight * normed.to(x.dtype)


class Attention(nn.Module):
    """Fused-QKV grouped-query self-attention over the paged KV cache."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.scale = self.head_dim**-0.5
        self.qkv_proj = nn.Linear(
            config.hidden_size, self.q_size + 2 * self.kv_size, bias=config.qkv_bias
        )
        self.o_proj = nn.Linear(self.q_size, config.hidden_size, bias=config.o_proj_bias)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps) if config.qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps) if config.qk_norm else None
        # set by the model runner: the layer's cache views and the attention implementation
        self.k_cache = torch.empty(0)
        self.v_cache = torch.empty(0)
        self.backend = None
        self.layer_index = 0  # set by LlamaModel: the op of a compiled forward names its layer

    def forward(
        self,
        x: torch.Tensor,
        cos_sin: tuple[torch.Tensor, torch.Tensor],
        meta: AttentionMetadata | None,
    ) -> torch.Tensor:
        num_tokens = x.shape[0]
        qkv = linear(x, self.qkv_proj.weight, self.qkv_proj.bias)  # (T, (Hq + 2 Hkv) D)
        num_qk_heads = self.num_heads + self.num_kv_heads
        # q and k side by side as (T, Hq + Hkv, D): normed per head (Qwen3), rotated together
        qk = qkv[:, : self.q_size + self.kv_size].view(num_tokens, num_qk_heads, self.head_dim)
        v = qkv[:, self.q_size + self.kv_size :].view(num_tokens, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None:
            qk = torch.cat(
                (self.q_norm(qk[:, : self.num_heads]), self.k_norm(qk[:, self.num_heads :])), dim=1
            )
        qk = apply_rotary(qk, *cos_sin)
        q, k = qk[:, : self.num_heads], qk[:, self.num_heads :]
        if torch.compiler.is_compiling():  # metadata from attention_step (decode_graphs.py)
            out = paged_attention(q, k, v, self.layer_index)
        else:
            out = self.backend.forward(q, k, v, self.k_cache, self.v_cache, meta, self.scale)
        return linear(out.reshape(num_tokens, self.q_size), self.o_proj.weight, self.o_proj.bias)


class MLP(nn.Module):
    """SwiGLU: ``down(silu(gate(x)) * up(x))`` with gate and up fused."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.intermediate_size = config.intermediate_size
        self.gate_up_proj = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = linear(x, self.gate_up_proj.weight).split(self.intermediate_size, dim=-1)
        return linear(F.silu(gate) * up, self.down_proj.weight)


class DecoderLayer(nn.Module):
    """Pre-norm residual block: attention then MLP."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = MLP(config)

    def forward(
        self,
        h: torch.Tensor,
        cos_sin: tuple[torch.Tensor, torch.Tensor],
        meta: AttentionMetadata | None,
    ) -> torch.Tensor:
        h = h + self.self_attn(self.input_layernorm(h), cos_sin, meta)
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaModel(nn.Module):
    """Embedding, decoder layers, final norm."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_hidden_layers))
        for index, layer in enumerate(self.layers):
            layer.self_attn.layer_index = index
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class LlamaForCausalLM(nn.Module):
    """Llama-family causal LM: ``forward`` gives hidden states, ``compute_logits`` the logits.

    ``packed_modules`` maps checkpoint weight names onto slices of our fused matrices.
    """

    packed_modules = {
        "q_proj": ("qkv_proj", 0),
        "k_proj": ("qkv_proj", 1),
        "v_proj": ("qkv_proj", 2),
        "gate_proj": ("gate_up_proj", 0),
        "up_proj": ("gate_up_proj", 1),
    }

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = (
            None
            if config.tie_word_embeddings
            else nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        )
        self.rotary: RotaryEmbedding | None = None
        self.lm_head_matmul = LMHead()

    def init_rotary(self, max_positions: int, device: torch.device | str) -> None:
        """Build the RoPE tables (after the weights are materialized on ``device``)."""
        c = self.config
        self.rotary = RotaryEmbedding(
            c.head_dim, max_positions, c.rope_theta, c.rope_scaling, device
        )

    def shard_sizes(self, fused_name: str) -> list[int]:
        """Row sizes of the pieces of a fused matrix, in ``packed_modules`` order."""
        c = self.config
        if fused_name == "qkv_proj":
            kv = c.num_key_value_heads * c.head_dim
            return [c.num_attention_heads * c.head_dim, kv, kv]
        return [c.intermediate_size, c.intermediate_size]

    def forward(
        self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata | None
    ) -> torch.Tensor:
        """Hidden states ``(T, hidden)`` for ``input_ids, positions (T,)``; writes the KV cache.

        ``meta`` is None in a compiled forward: attention reads the step's metadata from
        ``formcast.engine.attention.paged_op.attention_step`` instead.
        """
        h = self.model.embed_tokens(input_ids)
        cos_sin = self.rotary.cos_sin(positions, h.dtype)
        for layer in self.model.layers:
            h = layer(h, cos_sin, meta)
        return self.model.norm(h)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits ``(N, V)`` for hidden rows ``(N, hidden)``."""
        weight = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return self.lm_head_matmul(hidden, weight).float()
