"""A tiny Qwen2-style decoder with one MiMo-style MTP layer, in plain PyTorch.

Parameter names follow the Hugging Face Qwen2 checkpoint layout so that the saved
weights load in transformers (`Qwen2ForCausalLM`) and in vLLM (`MiMoForCausalLM`,
whose MTP draft model reads `model.mtp_layers.0.*`). The MTP forward mirrors
vLLM's `MiMoMultiTokenPredictorLayer`: at position t it sees the main model's last
hidden state h_t (before the final norm) and the embedding of token t+1 (zeroed at
position 0), and predicts token t+2 through the shared lm_head.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class TinyConfig:
    vocab_size: int
    hidden_size: int = 128
    intermediate_size: int = 512
    num_hidden_layers: int = 3
    num_attention_heads: int = 2
    num_key_value_heads: int = 1
    max_position_embeddings: int = 1024
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    num_nextn_predict_layers: int = 1
    eos_token_id: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def hf_config(self) -> dict:
        """config.json contents: Qwen2 model type, MiMo architecture (the MTP-capable loader)."""
        c = asdict(self)
        c.update(
            architectures=["MiMoForCausalLM"],
            model_type="qwen2",
            hidden_act="silu",
            initializer_range=0.02,
            tie_word_embeddings=False,
            torch_dtype="bfloat16",
            use_cache=True,
            use_sliding_window=False,
            sliding_window=None,
            max_window_layers=c["num_hidden_layers"],
            attention_dropout=0.0,
            bos_token_id=self.eos_token_id,
            head_dim=self.head_dim,
        )
        return c


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def rope_tables(cfg: TinyConfig, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2).float() / cfg.head_dim))
    freqs = torch.outer(torch.arange(length).float(), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_attention_heads * hd, bias=True)
        self.k_proj = nn.Linear(cfg.hidden_size, cfg.num_key_value_heads * hd, bias=True)
        self.v_proj = nn.Linear(cfg.hidden_size, cfg.num_key_value_heads * hd, bias=True)
        self.o_proj = nn.Linear(cfg.num_attention_heads * hd, cfg.hidden_size, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        hd = self.cfg.head_dim
        q = self.q_proj(x).view(b, t, -1, hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, -1, hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, -1, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        groups = self.cfg.num_attention_heads // self.cfg.num_key_value_heads
        if groups > 1:
            k = k.repeat_interleave(groups, dim=1)
            v = v.repeat_interleave(groups, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class MTPLayer(DecoderLayer):
    """MiMo MTP layer: the decoder layer's own params sit directly under mtp_layers.N."""

    def __init__(self, cfg: TinyConfig):
        super().__init__(cfg)
        self.token_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.hidden_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.input_proj = nn.Linear(2 * cfg.hidden_size, cfg.hidden_size, bias=False)
        self.final_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward_mtp(self, next_embeds, hidden, cos, sin):
        next_embeds = next_embeds.clone()
        next_embeds[:, 0] = 0.0  # vLLM masks the token embedding at position 0
        x = self.input_proj(torch.cat(
            [self.hidden_layernorm(hidden), self.token_layernorm(next_embeds)], dim=-1))
        return self.final_layernorm(DecoderLayer.forward(self, x, cos, sin))


class Backbone(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mtp_layers = nn.ModuleList(MTPLayer(cfg) for _ in range(cfg.num_nextn_predict_layers))


class TinyMTPModel(nn.Module):
    def __init__(self, cfg: TinyConfig):
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        cos, sin = rope_tables(cfg, cfg.max_position_embeddings)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init)

    @staticmethod
    def _init(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)

    def forward(self, ids: torch.Tensor, with_mtp: bool = True):
        """Returns (main logits [b,t,v], mtp logits [b,t-1,v] or None)."""
        t = ids.shape[1]
        cos, sin = self.rope_cos[:t], self.rope_sin[:t]
        embeds = self.model.embed_tokens(ids)
        h = embeds
        for layer in self.model.layers:
            h = layer(h, cos, sin)
        logits = self.lm_head(self.model.norm(h))
        if not with_mtp or not len(self.model.mtp_layers):
            return logits, None
        # position p of the MTP stream: hidden h_p and embedding of token p+1 -> predicts token p+2
        mtp_hidden = self.model.mtp_layers[0].forward_mtp(
            embeds[:, 1:], h[:, :-1], cos[: t - 1], sin[: t - 1])
        return logits, self.lm_head(mtp_hidden)

    def hf_config(self) -> dict:
        return self.cfg.hf_config()

    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().contiguous() for k, v in self.state_dict().items()}
