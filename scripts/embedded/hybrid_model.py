"""A tiny Qwen3-Next-style hybrid model (Gated DeltaNet + gated full attention, a small
MoE in every layer) with one Qwen3-Next MTP layer, for the #43559 study.

The main model is transformers' own `Qwen3NextForCausalLM` (its PyTorch reference kernels
for the GDN layers when flash-linear-attention is absent), so the saved weights are the
layout vLLM's `Qwen3NextForCausalLM` loads. The MTP layer mirrors vLLM's
`Qwen3NextMultiTokenPredictor` (`vllm/model_executor/models/qwen3_next_mtp.py`): at
position t it takes the main model's final (normed) hidden state h_t and the embedding of
token t+1, computes `fc(cat(pre_fc_norm_embedding(e), pre_fc_norm_hidden(h)))`, runs one
full-attention decoder layer (`mtp.layers.0`, a `Qwen3NextDecoderLayer`) and `mtp.norm`,
and predicts token t+2 through the shared lm_head.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn
from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
from transformers.models.qwen3_next.modeling_qwen3_next import (
    Qwen3NextDecoderLayer,
    Qwen3NextRMSNorm,
)

LAYER_TYPES = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]


def hybrid_config(vocab_size: int, eos_token_id: int) -> Qwen3NextConfig:
    """Head dimensions of 64 everywhere: vLLM's CPU attention runs head size 64. Two GDN
    value heads per key head, as Qwen3-Next has (16 key, 32 value heads): with one value
    head per key head, vLLM 0.26's packed GDN decode kernel on a GPU stops ("`a`/`b` must be
    contiguous in the last dim": the b/a split of `in_proj_ba` is then a strided view).
    Two KV heads in the attention layer: the attention block size follows from the GDN
    state's bytes (an attention page must hold at least one GDN state), and wider K/V
    pages keep the blocks small (128 tokens on vLLM's CPU backend)."""
    return Qwen3NextConfig(
        vocab_size=vocab_size, hidden_size=128, intermediate_size=256,
        num_hidden_layers=len(LAYER_TYPES), layer_types=list(LAYER_TYPES),
        num_attention_heads=2, num_key_value_heads=2, head_dim=64, partial_rotary_factor=0.25,
        linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=64,
        linear_value_head_dim=64, linear_conv_kernel_dim=4,
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=128,
        shared_expert_intermediate_size=128, decoder_sparse_step=1, mlp_only_layers=[],
        norm_topk_prob=True, max_position_embeddings=1024, rope_theta=10000.0,
        rms_norm_eps=1e-6, tie_word_embeddings=False, num_nextn_predict_layers=1,
        eos_token_id=eos_token_id, bos_token_id=eos_token_id, pad_token_id=eos_token_id,
    )


@dataclass(frozen=True)
class _Cfg:
    """What the shared training helpers read (`model.cfg.eos_token_id`)."""
    eos_token_id: int


class TinyHybridMTP(nn.Module):
    def __init__(self, config: Qwen3NextConfig):
        super().__init__()
        self.config = config
        self.cfg = _Cfg(eos_token_id=config.eos_token_id)
        self.lm = Qwen3NextForCausalLM(config)
        mtp_config = copy.deepcopy(config)
        mtp_config.layer_types = list(config.layer_types) + ["full_attention"]
        h = config.hidden_size
        self.mtp = nn.ModuleDict({
            "fc": nn.Linear(2 * h, h, bias=False),
            "pre_fc_norm_embedding": Qwen3NextRMSNorm(h, eps=config.rms_norm_eps),
            "pre_fc_norm_hidden": Qwen3NextRMSNorm(h, eps=config.rms_norm_eps),
            "layers": nn.ModuleList([Qwen3NextDecoderLayer(mtp_config, config.num_hidden_layers)]),
            "norm": Qwen3NextRMSNorm(h, eps=config.rms_norm_eps),
        })
        nn.init.normal_(self.mtp["fc"].weight, std=config.initializer_range)
        # transformers initializes its own modules; the MTP layer is built outside of it
        for module in self.mtp["layers"][0].modules():
            self.lm._init_weights(module)

    def forward(self, ids: torch.Tensor, with_mtp: bool = True):
        """Returns (main logits [b,t,v], MTP logits [b,t-1,v] or None); MTP position p
        predicts token p+2."""
        hidden = self.lm.model(input_ids=ids, use_cache=False).last_hidden_state
        logits = self.lm.lm_head(hidden)
        if not with_mtp:
            return logits, None
        t = ids.shape[1]
        embeds = self.lm.model.embed_tokens(ids[:, 1:])
        x = self.mtp["fc"](torch.cat([self.mtp["pre_fc_norm_embedding"](embeds),
                                      self.mtp["pre_fc_norm_hidden"](hidden[:, :-1])], dim=-1))
        positions = torch.arange(t - 1, device=ids.device).unsqueeze(0)
        rope = self.lm.model.rotary_emb(x, positions)
        x = self.mtp["layers"][0](x, position_embeddings=rope, attention_mask=None,
                                  position_ids=positions)
        return logits, self.lm.lm_head(self.mtp["norm"](x))

    def checkpoint_state_dict(self) -> dict[str, torch.Tensor]:
        """The Hugging Face checkpoint layout (as Qwen/Qwen3-Next-80B-A3B ships it): experts
        one by one (`mlp.experts.N.{gate,up,down}_proj.weight`, not transformers' fused
        tensors) and the MTP layer under `mtp.`."""
        state: dict[str, torch.Tensor] = {}
        items = list(self.lm.state_dict().items()) + [
            ("mtp." + k, v) for k, v in self.mtp.state_dict().items()]
        for name, tensor in items:
            if name.endswith("mlp.experts.gate_up_proj"):
                base = name[: -len("gate_up_proj")]
                inter = tensor.shape[1] // 2
                for e in range(tensor.shape[0]):
                    state[f"{base}{e}.gate_proj.weight"] = tensor[e, :inter]
                    state[f"{base}{e}.up_proj.weight"] = tensor[e, inter:]
            elif name.endswith("mlp.experts.down_proj"):
                base = name[: -len("down_proj")]
                for e in range(tensor.shape[0]):
                    state[f"{base}{e}.down_proj.weight"] = tensor[e]
            else:
                state[name] = tensor
        return {k: v.detach().contiguous() for k, v in state.items()}

    def hf_config(self) -> dict:
        c = self.config.to_dict()
        c.update(architectures=["Qwen3NextForCausalLM"], torch_dtype="bfloat16",
                 num_nextn_predict_layers=1)
        c.pop("transformers_version", None)
        c.pop("dtype", None)
        return c
