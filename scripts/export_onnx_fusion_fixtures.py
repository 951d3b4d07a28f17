#!/usr/bin/python3
"""Exports two real ONNX fixtures for the fusion patterns into OUT_DIR (default tests/data/onnx).

Run once by hand (never at build or test time) with Debian's python3-torch 1.13:
    /usr/bin/python3 scripts/export_onnx_fusion_fixtures.py tests/data/onnx

1. kda_gated_tiny.onnx (+ .truth.json): a tiny KDA-style gated decoder.

The graph is a real torch.onnx.export. Each layer is pre-norm (RMSNorm) -> q/k/v projections ->
the KDA recurrence as ONE custom-domain op (com.onboard::ChunkKDA, what a fused kernel's symbolic()
emits), fed by the per-channel decay gate g = -exp(A) * softplus(f_proj(h)) and the beta
sigmoid(b_proj(h)) -> output gate sigmoid(g_proj(h)) * o -> o_proj -> residual -> RMSNorm -> SwiGLU.
The truth file records the mixer every layer has ("mixer": heads, head dims, gate form, as the ONNX
layer analysis must read them from the op and its projections) and, per layer, which sigmoid feeds
the kernel and whether it may fuse:
  layer 0: beta's sigmoid is read only by the kernel            -> sigmoid->kernel fusable
  layer 1: beta also scales v before the kernel (a 2nd reader)  -> sigmoid->kernel blocked
  every layer: the output gate's sigmoid feeds a Mul, no kernel -> no sigmoid->kernel match
Shapes: tokens [1, T=8], hidden 64, heads 2 x head_dim 32 (q/k/v widths 64), FFN 128, vocab 100.

3. kda_kimi_tiny.onnx (+ .truth.json): the same decoder with the Kimi Linear KDA layer as the IR's KDA
   parameter formula counts it (q/k/v short convs of width 4, low-rank decay gate f_b(f_a(h)) + dt_bias in
   the bounded form -5 * sigmoid(exp(A_log) * (.)), per-head A_log, beta sigmoid, per-head o_norm, low-rank
   output gate), so its truth is checked field by field and its parameter count exactly by
   tests/parsers/onnx_fixtures_test.cpp.

2. parallel_block_tiny.onnx (+ .truth.json): a parallel-residual decoder, x + attn(n1(x)) + mlp(n2(x)),
   whose forward computes the MLP branch FIRST, so in graph order the FFN's norm precedes the
   attention's. Softmax attention (no mask), SwiGLU, same shapes. In layer 1 the residual is taken from
   the attention's normed input (h + attn(h) + mlp(n2(x))), so that norm's output has a second reader
   and must not fuse, while the FFN norm still does. The truth file lists, per layer, each norm's
   target (attention / mlp) and whether it may fuse.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

HIDDEN, HEADS, HEAD_DIM, FFN, VOCAB, LAYERS, SEQ = 64, 2, 32, 128, 100, 2, 8
CONV, LOWER_BOUND = 4, -5.0  # kda_kimi_tiny: short conv width, bounded gate lower bound


class ChunkKda(torch.autograd.Function):
    """The KDA recurrence (per head): S = diag(exp g_t) S + beta_t k_t (v_t - S^T k_t)^T, o_t = S^T q_t."""

    @staticmethod
    def forward(ctx, q, k, v, g, beta):
        b, t, hk = q.shape
        qh = q.view(b, t, HEADS, HEAD_DIM)
        kh = F.normalize(k.view(b, t, HEADS, HEAD_DIM), dim=-1)
        vh = v.view(b, t, HEADS, HEAD_DIM)
        gh = g.view(b, t, HEADS, HEAD_DIM)
        s = torch.zeros(b, HEADS, HEAD_DIM, HEAD_DIM)
        out = []
        for i in range(t):
            s = s * gh[:, i].exp().unsqueeze(-1)
            err = vh[:, i] - torch.einsum("bhk,bhkv->bhv", kh[:, i], s)
            s = s + beta[:, i].unsqueeze(-1).unsqueeze(-1) * torch.einsum("bhk,bhv->bhkv", kh[:, i], err)
            out.append(torch.einsum("bhk,bhkv->bhv", qh[:, i], s))
        return torch.stack(out, 1).reshape(b, t, hk)

    @staticmethod
    def symbolic(graph, q, k, v, g, beta):
        return graph.op("com.onboard::ChunkKDA", q, k, v, g, beta, num_heads_i=HEADS).setType(q.type())


class RmsNorm(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(HIDDEN))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class KdaAttention(nn.Module):
    def __init__(self, beta_scales_v):
        super().__init__()
        self.beta_scales_v = beta_scales_v
        self.q_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.f_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.b_proj = nn.Linear(HIDDEN, HEADS, bias=False)
        self.g_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)
        self.A_log = nn.Parameter(torch.zeros(HEADS * HEAD_DIM))

    def forward(self, h):
        q, k, v = self.q_proj(h), self.k_proj(h), self.v_proj(h)
        g = -self.A_log.exp() * F.softplus(self.f_proj(h))
        beta = torch.sigmoid(self.b_proj(h))
        if self.beta_scales_v:  # a second reader of the beta sigmoid: it must be written to memory
            v = v * beta.repeat_interleave(HEAD_DIM, dim=-1)
        o = ChunkKda.apply(q, k, v, g, beta)
        o = o * torch.sigmoid(self.g_proj(h))
        return self.o_proj(o)


class ShortConv(nn.Module):
    """Causal depthwise conv over time (width CONV, no bias) + SiLU, on [B, T, C]."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, CONV, groups=channels, padding=CONV - 1, bias=False)

    def forward(self, x):
        t = x.shape[1]
        return F.silu(self.conv(x.transpose(1, 2))[..., :t].transpose(1, 2))


class KimiKdaAttention(nn.Module):
    """The Kimi Linear KDA layer's parameters as the IR counts them: q/k/v short convs, a low-rank
    decay gate f_b(f_a(h)) with dt_bias and a per-head A_log in the bounded form
    LOWER_BOUND * sigmoid(exp(A_log) * (g + dt_bias)), beta sigmoid(b_proj(h)), a low-rank output
    gate g_b(g_a(h)) applied after a per-head RMSNorm (o_norm, weight [V]), o_proj."""

    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.q_conv, self.k_conv, self.v_conv = (ShortConv(HEADS * HEAD_DIM) for _ in range(3))
        self.f_a_proj = nn.Linear(HIDDEN, HEAD_DIM, bias=False)
        self.f_b_proj = nn.Linear(HEAD_DIM, HEADS * HEAD_DIM, bias=False)
        self.dt_bias = nn.Parameter(torch.rand(HEADS * HEAD_DIM))
        self.A_log = nn.Parameter(torch.rand(HEADS))
        self.b_proj = nn.Linear(HIDDEN, HEADS, bias=False)
        self.g_a_proj = nn.Linear(HIDDEN, HEAD_DIM, bias=False)
        self.g_b_proj = nn.Linear(HEAD_DIM, HEADS * HEAD_DIM, bias=False)
        self.o_norm_weight = nn.Parameter(torch.rand(HEAD_DIM) + 0.5)
        self.o_proj = nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)

    def forward(self, h):
        b, t, _ = h.shape
        q, k, v = self.q_conv(self.q_proj(h)), self.k_conv(self.k_proj(h)), self.v_conv(self.v_proj(h))
        f = (self.f_b_proj(self.f_a_proj(h)) + self.dt_bias).view(b, t, HEADS, HEAD_DIM)
        g = (LOWER_BOUND * torch.sigmoid(self.A_log.exp().view(HEADS, 1) * f)).reshape(b, t, HEADS * HEAD_DIM)
        beta = torch.sigmoid(self.b_proj(h))
        o = ChunkKda.apply(q, k, v, g, beta).view(b, t, HEADS, HEAD_DIM)
        o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-5) * self.o_norm_weight
        o = o * torch.sigmoid(self.g_b_proj(self.g_a_proj(h))).view(b, t, HEADS, HEAD_DIM)
        return self.o_proj(o.reshape(b, t, HEADS * HEAD_DIM))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(HIDDEN, FFN, bias=False)
        self.up_proj = nn.Linear(HIDDEN, FFN, bias=False)
        self.down_proj = nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, index):
        super().__init__()
        self.input_layernorm = RmsNorm()
        self.self_attn = KdaAttention(beta_scales_v=index == 1)
        self.post_attention_layernorm = RmsNorm()
        self.mlp = Mlp()

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class KimiLayer(Layer):
    def __init__(self, index):
        super().__init__(index)
        self.self_attn = KimiKdaAttention()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList([Layer(i) for i in range(LAYERS)])
        self.norm = RmsNorm()
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


class KimiModel(Model):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([KimiLayer(i) for i in range(LAYERS)])
        for name, p in self.named_parameters():  # distinct norm weights: no merged initializers
            if name.endswith("layernorm.weight") or name == "norm.weight":
                p.data.uniform_(0.5, 1.5)


class SoftmaxAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)

    def forward(self, h):
        b, t, _ = h.shape
        q, k, v = (p(h).view(b, t, HEADS, HEAD_DIM).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        p = torch.softmax(q @ k.transpose(-1, -2) / HEAD_DIM**0.5, dim=-1)
        return self.o_proj((p @ v).transpose(1, 2).reshape(b, t, HEADS * HEAD_DIM))


class ParallelLayer(nn.Module):
    def __init__(self, index):
        super().__init__()
        self.residual_from_norm = index == 1
        self.input_layernorm = RmsNorm()
        self.self_attn = SoftmaxAttention()
        # A distinct eps: both norms read the same x, and the exporter merges two identical
        # normalisations into one, leaving only the two weight Muls.
        self.post_attention_layernorm = RmsNorm(eps=1e-5)
        self.mlp = Mlp()

    def forward(self, x):
        m = self.mlp(self.post_attention_layernorm(x))  # traced first: the FFN norm leads in graph order
        h = self.input_layernorm(x)
        return (h if self.residual_from_norm else x) + self.self_attn(h) + m


class ParallelModel(Model):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([ParallelLayer(i) for i in range(LAYERS)])
        # Trained-looking norm weights: torch.onnx would merge all-ones vectors into one initializer.
        for name, p in self.named_parameters():
            if name.endswith("layernorm.weight"):
                p.data.uniform_(0.5, 1.5)


def export(model, name, out_dir, truth):
    ids = torch.randint(0, VOCAB, (1, SEQ))
    path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(model, (ids,), path, input_names=["input_ids"], output_names=["logits"],
                      opset_version=17, custom_opsets={"com.onboard": 1}, do_constant_folding=False)
    truth = dict(truth, total_params=sum(p.numel() for p in model.parameters()), num_layers=LAYERS,
                 hidden_size=HIDDEN, vocab_size=VOCAB)
    with open(os.path.join(out_dir, name + ".truth.json"), "w") as f:
        json.dump(truth, f, indent=2, sort_keys=True)
        f.write("\n")
    print(path, truth["total_params"], "params")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/data/onnx"
    torch.manual_seed(0)
    export(Model().eval(), "kda_gated_tiny", out_dir, {
        "kernel_op": "com.onboard::ChunkKDA",
        # What the layer analysis must read from the op and its projections (every layer).
        "mixer": {"kind": "KDA", "num_heads": HEADS, "head_dim": HEAD_DIM, "num_v_heads": HEADS,
                  "v_head_dim": HEAD_DIM, "gate_form": "original", "full_rank_gate": True,
                  "output_gate": True, "mlp": "swiglu", "intermediate_size": FFN},
        "sigmoid_into_kernel": [{"layer": 0, "fusable": True}, {"layer": 1, "fusable": False}],
    })
    torch.manual_seed(1)
    export(ParallelModel().eval(), "parallel_block_tiny", out_dir, {
        "norm_linear": [
            {"layer": 0, "graph_order": ["mlp", "attention"], "fusable": {"attention": True, "mlp": True}},
            {"layer": 1, "graph_order": ["mlp", "attention"], "fusable": {"attention": False, "mlp": True}},
        ],
    })

    torch.manual_seed(2)
    export(KimiModel().eval(), "kda_kimi_tiny", out_dir, {
        "attention": "kda", "family": "decoder", "head_dim": HEAD_DIM, "num_heads": HEADS,
        "num_kv_heads": HEADS, "intermediate_size": FFN, "mlp": "swiglu", "moe": None, "norm": "rmsnorm",
        "kda": {"conv_kernel": CONV, "gate_form": "bounded", "gate_lower_bound": LOWER_BOUND,
                "full_rank_gate": False, "output_gate": True, "num_v_heads": HEADS, "v_head_dim": HEAD_DIM,
                "qk_norm": False},  # the head-wide norm is the o_norm
    })


if __name__ == "__main__":
    main()
