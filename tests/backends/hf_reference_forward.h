// Independent reference forward for the test checkpoints (hf_test_checkpoint.h): plain loops in
// double over the values the test wrote, one token / head / expert at a time. It reads config.json
// itself and shares no code with backends/hf_*.cpp. Written from the transformers modeling files'
// definitions: RMSNorm, rotate-half RoPE (interleaved pairs for DeepSeek), GQA, Qwen3 q/k norms,
// MLA, softmax / sigmoid-grouped routing, SwiGLU; glm4_moe (partial RoPE, DeepSeek routing);
// gpt_oss (sinks, sliding window per layer_types, top-k-then-softmax router with bias, the clamped
// interleaved SwiGLU experts); kimi_k3 (hf_reference_k3.h: its text model's view, K3TextView).
// Shapes: x[t][i] for token t; linears W[out][in] row-major.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <numeric>
#include <string>
#include <vector>

#include "tests/backends/hf_test_checkpoint.h"

namespace onboard::hftest {

using Vec = std::vector<double>;
using Mat = std::vector<Vec>;  // [tokens][features]

struct RefOverrides {           // deliberate errors, to show the comparison can fail
  double theta_scale = 1.0;     // multiplies rope_theta
  double eps = -1.0;            // replaces rms_norm_eps when >= 0
  int64_t first_layer = 0;      // layer slice (inclusive); last < 0 = through the last layer
  int64_t last_layer = -1;
  bool drop_sinks = false;          // gpt_oss: ignore the sink logits
  bool full_windows = false;        // gpt_oss: every layer full attention
  double swiglu_limit = -1.0;       // gpt_oss: replaces swiglu_limit when >= 0
  double rotary_fraction = -1;      // replaces partial_rotary_factor when > 0
  bool dense_dsa = false;           // deepseek_v32: attend to every causal key (no indexer)
  bool indexer_interleave = false;  // deepseek_v32: rotate indexer q/k in pairs (the MLA layout)
  bool indexer_ties_last = false;   // deepseek_v32: equal index scores pick the later key first
  bool indexer_no_k_bias = false;   // deepseek_v32: k_norm without its bias
  bool kda_no_conv = false;         // kimi_linear: skip the short convolutions (SiLU of the projection)
  bool kda_drop_dt_bias = false;    // kimi_linear: decay gate without dt_bias
  bool k3_skip_latent_norm = false;  // kimi_k3: latent MoE without routed_expert_norm
  bool k3_norm_after_down = false;   // kimi_k3: the latent norm on the down-projection (before the experts)
  bool k3_no_mla_gate = false;       // kimi_k3: MLA without its output gate
  bool k3_softplus_decay = false;    // kimi_k3: KDA decay by the softplus form, ignoring gate_lower_bound
  bool situ_as_silu = false;         // hidden_act situ run as SwiGLU
};

class Reference {
 public:
  Reference(const Checkpoint& c, RefOverrides o = {}) : c_(c), cfg_(c.config), o_(o) {}

  // logits[t][v] for one sequence.
  Mat Logits(const std::vector<int64_t>& ids) const { return LogitsOfEmbeds(Embed(ids)); }
  Mat Embed(const std::vector<int64_t>& ids) const {
    const int64_t h = cfg_["hidden_size"];
    Mat x;
    for (int64_t id : ids) x.push_back(Vec(c_.W("model.embed_tokens.weight").begin() + id * h,
                                           c_.W("model.embed_tokens.weight").begin() + (id + 1) * h));
    return x;
  }
  // GLM-4.5V's M-RoPE: token t's (temporal, height, width) positions and rope_scaling.mrope_section.
  // GQA layers then rotate dim d of the rotary part at the position of row (chunk of d) % 3, the
  // chunks being mrope_section twice over the rotary dims (apply_multimodal_rotary_pos_emb).
  void SetMropePositions(std::vector<std::array<int64_t, 3>> pos, std::vector<int64_t> section) {
    mpos_ = std::move(pos);
    msec_ = std::move(section);
  }
  // logits[t][v] from input embeddings x[t] (an image's features in place of its placeholders).
  Mat LogitsOfEmbeds(Mat x) const {
    const int64_t h = cfg_["hidden_size"], vocab = cfg_["vocab_size"], layers = cfg_["num_hidden_layers"];
    const int64_t last = o_.last_layer < 0 ? layers - 1 : o_.last_layer;
    for (int64_t l = o_.first_layer; l <= last; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      Mat a = Attention(p, Norm(x, p + "input_layernorm.weight", Eps()));
      for (size_t t = 0; t < x.size(); ++t)
        for (int64_t i = 0; i < h; ++i) x[t][i] += a[t][i];
      Mat n = Norm(x, p + "post_attention_layernorm.weight", Eps());
      for (size_t t = 0; t < x.size(); ++t) {
        Vec m = Channel(p, l, n[t]);
        for (int64_t i = 0; i < h; ++i) x[t][i] += m[i];
      }
    }
    Mat n = Norm(x, "model.norm.weight", Eps());
    const std::string head = c_.Has("lm_head.weight") ? "lm_head.weight" : "model.embed_tokens.weight";
    Mat out;
    for (const Vec& r : n) out.push_back(MatVec(head, r, vocab));
    return out;
  }

 private:
  std::string Type() const { return cfg_["model_type"]; }
  double Eps() const { return o_.eps >= 0 ? o_.eps : cfg_.value("rms_norm_eps", 1e-6); }
  bool K3() const { return Type() == "kimi_k3"; }
  bool Nope() const { return Type() == "kimi_linear" || K3(); }  // mla_use_nope: no RoPE anywhere
  bool Mla() const { return Type() == "deepseek_v3" || Type() == "deepseek_v32" || Nope(); }
  bool SigmoidMoe() const { return Mla() || Type() == "glm4_moe"; }
  // First of the JSON keys present (the families spell the same field differently).
  int64_t Field(std::initializer_list<const char*> keys) const {
    for (const char* k : keys)
      if (cfg_.contains(k) && cfg_[k].is_number()) return cfg_[k].get<int64_t>();
    return 0;
  }
  Mat Kda(const std::string& p, const Mat& x) const;  // hf_reference_kda.h
  // hf_reference_k3.h: the latent routed experts' output; the gated MLA's per-head output gate.
  Vec K3LatentRouted(const std::string& moe, const Vec& x, const std::vector<int64_t>& chosen, const Vec& w,
                     int64_t inter) const;
  Vec K3MlaGate(const std::string& p, const Vec& x, Vec o) const;
  double K3Situ(double gate, double up) const;  // SiTU-GLU of one channel

  // y = W x (+ b), W [out][in].
  Vec MatVec(const std::string& w, const Vec& x, int64_t out, const std::string& bias = "") const {
    const std::vector<double>& W = c_.W(w);
    const size_t in = x.size();
    Vec y(static_cast<size_t>(out), 0.0);
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (size_t i = 0; i < in; ++i) s += W[size_t(o) * in + i] * x[i];
      y[size_t(o)] = s + (bias.empty() || !c_.Has(bias) ? 0.0 : c_.W(bias)[size_t(o)]);
    }
    return y;
  }
  Vec NormVec(const Vec& x, const std::vector<double>& w, double eps, size_t off = 0, size_t n = 0) const {
    if (n == 0) n = x.size();
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
    const double r = 1.0 / std::sqrt(ss / double(n) + eps);
    Vec y(n);
    for (size_t i = 0; i < n; ++i) y[i] = w[i] * x[off + i] * r;
    return y;
  }
  Mat Norm(const Mat& x, const std::string& w, double eps) const {
    Mat y;
    for (const Vec& r : x) y.push_back(NormVec(r, c_.W(w), eps));
    return y;
  }

  // Frequency of rotary pair i (of dim/2) after the config's rope_scaling.
  double Freq(int64_t i, int64_t dim, double* mag) const {
    const double theta = cfg_.value("rope_theta", 10000.0) * o_.theta_scale;
    const double base = std::pow(theta, -2.0 * double(i) / double(dim));
    *mag = 1.0;
    if (!cfg_.contains("rope_scaling") || !cfg_["rope_scaling"].is_object()) return base;
    const auto& s = cfg_["rope_scaling"];
    const std::string type = s.value("rope_type", s.value("type", std::string("default")));
    const double factor = s.value("factor", 1.0);
    const double orig = s.value("original_max_position_embeddings", double(cfg_["max_position_embeddings"]));
    if (type == "llama3") {
      const double lo = s.value("low_freq_factor", 1.0), hi = s.value("high_freq_factor", 4.0);
      const double wl = 2 * M_PI / base;
      if (wl < orig / hi) return base;
      if (wl > orig / lo) return base / factor;
      const double sm = (orig / wl - lo) / (hi - lo);
      return (1 - sm) * base / factor + sm * base;
    }
    if (type != "yarn") return base;
    auto dim_of = [&](double rot) { return dim * std::log(orig / (rot * 2 * M_PI)) / (2 * std::log(theta)); };
    const bool trunc = s.value("truncate", true);
    const double lo_raw = dim_of(s.value("beta_fast", 32.0)), hi_raw = dim_of(s.value("beta_slow", 1.0));
    const double low = std::max(0.0, trunc ? std::floor(lo_raw) : lo_raw);
    const double high = std::min(double(dim - 1), trunc ? std::ceil(hi_raw) : hi_raw);
    const double ramp = std::clamp((double(i) - low) / (high == low ? 0.001 : high - low), 0.0, 1.0);
    auto m = [&](double k) { return factor <= 1 ? 1.0 : 0.1 * k * std::log(factor) + 1.0; };
    const double ms = s.value("mscale", 0.0), msa = s.value("mscale_all_dim", 0.0);
    *mag = (ms != 0 && msa != 0) ? m(ms) / m(msa) : m(1.0);
    return base / factor * ramp + base * (1 - ramp);
  }
  // Rotates v[off .. off+dim) for position `pos`: halves (i, i + dim/2), or pairs (2i, 2i+1).
  void Rope(Vec& v, size_t off, int64_t dim, int64_t pos, bool pairs) const {
    Vec r(v.begin() + off, v.begin() + off + dim);
    for (int64_t i = 0; i < dim / 2; ++i) {
      double mag;
      const double f = Freq(i, dim, &mag), a = double(pos) * f;
      const size_t i1 = pairs ? size_t(2 * i) : size_t(i), i2 = pairs ? size_t(2 * i + 1) : size_t(i + dim / 2);
      v[off + i1] = mag * (r[i1] * std::cos(a) - r[i2] * std::sin(a));
      v[off + i2] = mag * (r[i2] * std::cos(a) + r[i1] * std::sin(a));
    }
  }

  // Rotate-half RoPE of v[0 .. dim) for token t at its three M-RoPE positions (SetMropePositions).
  void MropeAt(Vec& v, int64_t dim, size_t t) const {
    std::vector<int64_t> chunks = msec_;
    chunks.insert(chunks.end(), msec_.begin(), msec_.end());
    const Vec r(v.begin(), v.begin() + dim);
    int64_t d = 0;
    for (size_t j = 0; j < chunks.size(); ++j)
      for (int64_t e = 0; e < chunks[j]; ++e, ++d) {
        double mag;
        const double a = double(mpos_[t][j % 3]) * Freq(d % (dim / 2), dim, &mag);
        const double rot = d < dim / 2 ? -r[size_t(d + dim / 2)] : r[size_t(d - dim / 2)];
        v[size_t(d)] = mag * (r[size_t(d)] * std::cos(a) + rot * std::sin(a));
      }
  }

  Mat Attention(const std::string& p, const Mat& x) const {
    if (Nope()) {  // kimi_linear, kimi_k3
      const int64_t one_based = int64_t(std::stoul(p.substr(13))) + 1;
      for (const auto& l : cfg_["linear_attn_config"]["kda_layers"])
        if (l.get<int64_t>() == one_based) return Kda(p, x);
    }
    return Mla() ? MlaAttn(p, x) : Gqa(p, x);
  }

  // One head: causal softmax over keys j (t - window < j <= t when window > 0) of scaled dot
  // products, weighted sum of values; a sink logit adds exp(sink) to the denominator only.
  // `keep` (DSA) lists the keys allowed for query t, when given.
  Vec Head(const Mat& q, const Mat& k, const Mat& v, size_t t, double scale, size_t window = 0,
           const double* sink = nullptr, const std::vector<int64_t>* keep = nullptr) const {
    std::vector<int64_t> keys;
    for (size_t j = window > 0 && t + 1 > window ? t + 1 - window : 0; j <= t; ++j)
      if (!keep || std::count(keep->begin(), keep->end(), int64_t(j))) keys.push_back(int64_t(j));
    Vec s(t + 1, 0.0);
    double mx = sink ? *sink : -1e300;
    for (int64_t j : keys) {
      s[j] = scale * std::inner_product(q[t].begin(), q[t].end(), k[j].begin(), 0.0);
      mx = std::max(mx, s[j]);
    }
    double z = sink ? std::exp(*sink - mx) : 0.0;
    for (int64_t j : keys) z += (s[j] = std::exp(s[j] - mx));
    Vec o(v[0].size(), 0.0);
    for (int64_t j : keys)
      for (size_t d = 0; d < o.size(); ++d) o[d] += s[j] / z * v[j][d];
    return o;
  }

  // DeepSeek-V3.2 indexer: per query t, the top-min(index_topk, t+1) causal keys of
  // sum_h w[t][h] relu(q[t][h].k[j] / sqrt(dI)), w = weights_proj x / sqrt(nI); q = wq_b(q_resid) and
  // k = LayerNorm(wk x) rotated half-split on their first qk_rope_head_dim dims. A key whose every
  // head dot is negative scores exactly 0, so equal scores are common: the earlier key wins the tie.
  std::vector<std::vector<int64_t>> Indexer(const std::string& p, const Mat& x, const Mat& q_resid) const {
    const int64_t nI = cfg_["index_n_heads"], dI = cfg_["index_head_dim"], dr = cfg_["qk_rope_head_dim"];
    const int64_t topk = cfg_["index_topk"];
    const std::string ip = p + "self_attn.indexer.";
    Mat ks, ws;
    std::vector<Mat> qs;
    for (size_t t = 0; t < x.size(); ++t) {
      Vec k = MatVec(ip + "wk.weight", x[t], dI);
      const double mean = std::accumulate(k.begin(), k.end(), 0.0) / double(dI);
      double var = 0;
      for (double e : k) var += (e - mean) * (e - mean) / double(dI);
      for (int64_t i = 0; i < dI; ++i)
        k[i] = (k[i] - mean) / std::sqrt(var + 1e-6) * c_.W(ip + "k_norm.weight")[i] +
               (o_.indexer_no_k_bias ? 0.0 : c_.W(ip + "k_norm.bias")[i]);
      if (!Nope()) Rope(k, 0, dr, int64_t(t), o_.indexer_interleave);
      ks.push_back(k);
      const Vec qf = MatVec(ip + "wq_b.weight", q_resid[t], nI * dI);
      Mat qh;
      for (int64_t h = 0; h < nI; ++h) {
        qh.push_back(Vec(qf.begin() + h * dI, qf.begin() + (h + 1) * dI));
        if (!Nope()) Rope(qh.back(), 0, dr, int64_t(t), o_.indexer_interleave);
      }
      qs.push_back(qh);
      ws.push_back(MatVec(ip + "weights_proj.weight", x[t], nI));
    }
    std::vector<std::vector<int64_t>> keep;
    for (size_t t = 0; t < x.size(); ++t) {
      Vec score(t + 1, 0.0);
      for (size_t j = 0; j <= t; ++j)
        for (int64_t h = 0; h < nI; ++h) {
          const double dot = std::inner_product(qs[t][h].begin(), qs[t][h].end(), ks[j].begin(), 0.0);
          score[j] += ws[t][h] / std::sqrt(double(nI)) * std::max(0.0, dot / std::sqrt(double(dI)));
        }
      keep.push_back(TopK(score, std::min<int64_t>(topk, int64_t(t + 1)), o_.indexer_ties_last));
    }
    return keep;
  }
  // gpt_oss layer_types: the window of layer l (0 = full attention).
  size_t Window(const std::string& p) const {
    if (!cfg_.contains("layer_types") || o_.full_windows) return 0;
    const size_t l = std::stoul(p.substr(13));
    return cfg_["layer_types"][l] == "sliding_attention" ? size_t(cfg_["sliding_window"]) : 0;
  }

  Mat Gqa(const std::string& p, const Mat& x) const {
    const int64_t H = cfg_["num_attention_heads"], KV = cfg_["num_key_value_heads"], d = cfg_["head_dim"];
    const int64_t h = cfg_["hidden_size"];
    const bool qk_norm = Type() == "qwen3" || Type() == "qwen3_moe" || cfg_.value("use_qk_norm", false);
    const double frac = o_.rotary_fraction > 0
                            ? o_.rotary_fraction
                            : cfg_.value("partial_rotary_factor", Type() == "glm4_moe" ? 0.5 : 1.0);
    const int64_t rd = int64_t(double(d) * frac);
    const bool sinks = c_.Has(p + "self_attn.sinks") && !o_.drop_sinks;
    Mat out(x.size(), Vec(size_t(H * d)));
    Mat qs, ks, vs;
    for (size_t t = 0; t < x.size(); ++t) {
      qs.push_back(MatVec(p + "self_attn.q_proj.weight", x[t], H * d, p + "self_attn.q_proj.bias"));
      ks.push_back(MatVec(p + "self_attn.k_proj.weight", x[t], KV * d, p + "self_attn.k_proj.bias"));
      vs.push_back(MatVec(p + "self_attn.v_proj.weight", x[t], KV * d, p + "self_attn.v_proj.bias"));
    }
    for (int64_t hd = 0; hd < H; ++hd) {
      const int64_t g = hd / (H / KV);
      Mat q, k, v;
      for (size_t t = 0; t < x.size(); ++t) {
        Vec qh(qs[t].begin() + hd * d, qs[t].begin() + (hd + 1) * d), kh(ks[t].begin() + g * d, ks[t].begin() + (g + 1) * d);
        if (qk_norm) {
          qh = NormVec(qh, c_.W(p + "self_attn.q_norm.weight"), Eps());
          kh = NormVec(kh, c_.W(p + "self_attn.k_norm.weight"), Eps());
        }
        if (mpos_.empty()) {
          Rope(qh, 0, rd, int64_t(t), false);
          Rope(kh, 0, rd, int64_t(t), false);
        } else {
          MropeAt(qh, rd, t);
          MropeAt(kh, rd, t);
        }
        q.push_back(qh);
        k.push_back(kh);
        v.push_back(Vec(vs[t].begin() + g * d, vs[t].begin() + (g + 1) * d));
      }
      for (size_t t = 0; t < x.size(); ++t) {
        const double* sink = sinks ? &c_.W(p + "self_attn.sinks")[size_t(hd)] : nullptr;
        Vec o = Head(q, k, v, t, 1.0 / std::sqrt(double(d)), Window(p), sink);
        std::copy(o.begin(), o.end(), out[t].begin() + hd * d);
      }
    }
    Mat y;
    for (const Vec& o : out)
      y.push_back(MatVec(p + "self_attn.o_proj.weight", o, h, p + "self_attn.o_proj.bias"));
    return y;
  }

  Mat MlaAttn(const std::string& p, const Mat& x) const {
    const int64_t H = cfg_["num_attention_heads"], dn = cfg_["qk_nope_head_dim"], dr = cfg_["qk_rope_head_dim"];
    const int64_t dv = cfg_["v_head_dim"], rq = Field({"q_lora_rank"}), rkv = cfg_["kv_lora_rank"],
                  h = cfg_["hidden_size"];
    const bool rope = !Nope();  // Kimi-Linear / kimi_k3 MLA: mla_use_nope
    double scale = 1.0 / std::sqrt(double(dn + dr));
    if (cfg_.contains("rope_scaling") && cfg_["rope_scaling"].is_object()) {
      const auto& s = cfg_["rope_scaling"];
      const double f = s["factor"], msa = s["mscale_all_dim"];
      const double m = 0.1 * msa * std::log(f) + 1.0;
      scale *= m * m;
    }
    Mat qs, lat, krot, q_resid;
    for (size_t t = 0; t < x.size(); ++t) {
      if (rq == 0) {
        qs.push_back(MatVec(p + "self_attn.q_proj.weight", x[t], H * (dn + dr)));
      } else {
        Vec qa = NormVec(MatVec(p + "self_attn.q_a_proj.weight", x[t], rq),
                         c_.W(p + "self_attn.q_a_layernorm.weight"), 1e-6);
        q_resid.push_back(qa);
        qs.push_back(MatVec(p + "self_attn.q_b_proj.weight", qa, H * (dn + dr)));
      }
      Vec kv = MatVec(p + "self_attn.kv_a_proj_with_mqa.weight", x[t], rkv + dr);
      lat.push_back(MatVec(p + "self_attn.kv_b_proj.weight", NormVec(kv, c_.W(p + "self_attn.kv_a_layernorm.weight"), 1e-6, 0, size_t(rkv)), H * (dn + dv)));
      Vec kr(kv.begin() + rkv, kv.end());
      if (rope) Rope(kr, 0, dr, int64_t(t), true);
      krot.push_back(kr);
    }
    const bool dsa = (Type() == "deepseek_v32" || (K3() && cfg_.contains("index_topk"))) && !o_.dense_dsa;
    const std::vector<std::vector<int64_t>> keep =
        dsa ? Indexer(p, x, q_resid) : std::vector<std::vector<int64_t>>();
    Mat out(x.size(), Vec(size_t(H * dv)));
    for (int64_t hd = 0; hd < H; ++hd) {
      Mat q, k, v;
      for (size_t t = 0; t < x.size(); ++t) {
        Vec qh(qs[t].begin() + hd * (dn + dr), qs[t].begin() + (hd + 1) * (dn + dr));
        if (rope) Rope(qh, size_t(dn), dr, int64_t(t), true);
        Vec kh(lat[t].begin() + hd * (dn + dv), lat[t].begin() + hd * (dn + dv) + dn);
        kh.insert(kh.end(), krot[t].begin(), krot[t].end());
        q.push_back(qh);
        k.push_back(kh);
        v.push_back(Vec(lat[t].begin() + hd * (dn + dv) + dn, lat[t].begin() + (hd + 1) * (dn + dv)));
      }
      for (size_t t = 0; t < x.size(); ++t) {
        Vec o = Head(q, k, v, t, scale, 0, nullptr, dsa ? &keep[t] : nullptr);
        std::copy(o.begin(), o.end(), out[t].begin() + hd * dv);
      }
    }
    Mat y;
    for (size_t t = 0; t < out.size(); ++t)
      y.push_back(MatVec(p + "self_attn.o_proj.weight", K3() ? K3MlaGate(p, x[t], out[t]) : out[t], h));
    return y;
  }

  Vec Swiglu(const std::string& p, const Vec& x, int64_t inter, const char* g = "gate_proj", const char* u = "up_proj",
             const char* d = "down_proj") const {
    Vec a = MatVec(p + "." + g + ".weight", x, inter), b = MatVec(p + "." + u + ".weight", x, inter);
    const bool situ = cfg_.value("hidden_act", std::string("silu")) == "situ" && !o_.situ_as_silu;
    for (int64_t i = 0; i < inter; ++i)
      a[i] = situ ? K3Situ(a[i], b[i]) : a[i] / (1 + std::exp(-a[i])) * b[i];
    return MatVec(p + "." + d + ".weight", a, int64_t(x.size()));
  }

  // Indices of the k largest values (ties: lower index first, or higher with `ties_last`).
  static std::vector<int64_t> TopK(const Vec& s, int64_t k, bool ties_last = false) {
    std::vector<int64_t> idx(s.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
      return s[a] > s[b] || (ties_last && s[a] == s[b] && a > b);
    });
    idx.resize(size_t(k));
    return idx;
  }

  Vec Channel(const std::string& p, int64_t layer, const Vec& x) const {
    const std::string t = Type();
    if (t == "gpt_oss") return GptOssMoe(p + "mlp", x);
    if (t == "llama" || t == "qwen2" || t == "qwen3" ||
        (SigmoidMoe() && layer < cfg_["first_k_dense_replace"]))
      return Swiglu(p + "mlp", x, cfg_["intermediate_size"]);
    const bool mixtral = t == "mixtral", block_sparse = mixtral || Nope();
    const std::string moe = p + (block_sparse ? "block_sparse_moe" : "mlp");
    const int64_t E = Field({"num_local_experts", "n_routed_experts", "num_experts"});
    const int64_t k = Field({"num_experts_per_tok", "num_experts_per_token"});
    const int64_t inter = mixtral ? cfg_["intermediate_size"] : cfg_["moe_intermediate_size"];
    Vec logits = MatVec(moe + ".gate.weight", x, E);
    std::vector<int64_t> chosen;
    Vec w(static_cast<size_t>(E), 0.0);
    if (SigmoidMoe()) {  // sigmoid, bias for choice only, group-limited
      Vec sc(static_cast<size_t>(E)), ch(static_cast<size_t>(E));
      for (int64_t e = 0; e < E; ++e) {
        sc[e] = 1 / (1 + std::exp(-logits[e]));
        ch[e] = sc[e] + c_.W(moe + ".gate.e_score_correction_bias")[e];
      }
      const int64_t G = Field({"n_group", "num_expert_group"}), per = E / G;
      Vec gs(static_cast<size_t>(G));
      for (int64_t g = 0; g < G; ++g) {
        Vec part(ch.begin() + g * per, ch.begin() + (g + 1) * per);
        std::sort(part.rbegin(), part.rend());
        gs[g] = part[0] + part[1];
      }
      const std::vector<int64_t> groups = TopK(gs, cfg_["topk_group"]);
      Vec masked(static_cast<size_t>(E), 0.0);
      for (int64_t g : groups)
        for (int64_t e = g * per; e < (g + 1) * per; ++e) masked[e] = ch[e];
      chosen = TopK(masked, k);
      double z = 0;
      for (int64_t e : chosen) z += sc[e];
      for (int64_t e : chosen) w[e] = sc[e] / (z + 1e-20) * double(cfg_["routed_scaling_factor"]);
    } else {  // softmax, top-k, renormalised
      double mx = *std::max_element(logits.begin(), logits.end()), z = 0;
      Vec pr(static_cast<size_t>(E));
      for (int64_t e = 0; e < E; ++e) z += (pr[e] = std::exp(logits[e] - mx));
      for (double& v : pr) v /= z;
      chosen = TopK(pr, k);
      double zk = 0;
      for (int64_t e : chosen) zk += pr[e];
      const bool renorm = mixtral || cfg_.value("norm_topk_prob", false);
      for (int64_t e : chosen) w[e] = renorm ? pr[e] / zk : pr[e];
    }
    Vec y = K3() ? K3LatentRouted(moe, x, chosen, w, inter) : Vec(x.size(), 0.0);
    for (int64_t e : K3() ? std::vector<int64_t>() : chosen) {
      const std::string ep = moe + ".experts." + std::to_string(e);
      Vec o = block_sparse ? Swiglu(ep, x, inter, "w1", "w3", "w2") : Swiglu(ep, x, inter);
      for (size_t i = 0; i < y.size(); ++i) y[i] += w[e] * o[i];
    }
    if (SigmoidMoe()) {
      Vec s = Swiglu(moe + ".shared_experts", x, inter * Field({"n_shared_experts", "num_shared_experts"}));
      for (size_t i = 0; i < y.size(); ++i) y[i] += s[i];
    }
    return y;
  }

  // gpt_oss: logits = W x + b; top-k logits; softmax over them; expert e: gate_up[e] x + b gives
  // gate (even columns) and up (odd), out = down[e] ((clamp(up) + 1) * g sigmoid(1.702 g)) + b,
  // g = min(gate, limit). gate_up[e] is read as [2I][h]: MXFP4 values (decoded) or dense [h][2I].
  Vec GptOssMoe(const std::string& p, const Vec& x) const {
    const int64_t E = cfg_["num_local_experts"], k = cfg_["num_experts_per_tok"],
                  I = cfg_["intermediate_size"];
    const size_t h = x.size();
    const double limit = o_.swiglu_limit >= 0 ? o_.swiglu_limit : cfg_.value("swiglu_limit", 7.0);
    const Vec logits = MatVec(p + ".router.weight", x, E, p + ".router.bias");
    const std::vector<int64_t> chosen = TopK(logits, k);
    double mx = logits[size_t(chosen[0])], z = 0;
    for (int64_t e : chosen) z += std::exp(logits[size_t(e)] - mx);
    const bool mx4 = c_.decoded.count(p + ".experts.gate_up_proj") > 0;
    const std::vector<double>& gu = c_.W(p + ".experts.gate_up_proj");
    const std::vector<double>& dn = c_.W(p + ".experts.down_proj");
    Vec y(h, 0.0);
    for (int64_t e : chosen) {
      Vec act(static_cast<size_t>(I));
      for (int64_t j = 0; j < I; ++j) {
        double g = c_.W(p + ".experts.gate_up_proj_bias")[size_t(e * 2 * I + 2 * j)];
        double u = c_.W(p + ".experts.gate_up_proj_bias")[size_t(e * 2 * I + 2 * j + 1)];
        for (size_t i = 0; i < h; ++i) {
          g += x[i] * gu[mx4 ? size_t((e * 2 * I + 2 * j) * int64_t(h)) + i
                             : size_t(e * int64_t(h) + int64_t(i)) * size_t(2 * I) + size_t(2 * j)];
          u += x[i] * gu[mx4 ? size_t((e * 2 * I + 2 * j + 1) * int64_t(h)) + i
                             : size_t(e * int64_t(h) + int64_t(i)) * size_t(2 * I) + size_t(2 * j + 1)];
        }
        g = std::min(g, limit);
        u = std::clamp(u, -limit, limit);
        act[size_t(j)] = (u + 1) * g / (1 + std::exp(-1.702 * g));
      }
      const double w = std::exp(logits[size_t(e)] - mx) / z;
      for (size_t o = 0; o < h; ++o) {
        double s = c_.W(p + ".experts.down_proj_bias")[size_t(e) * h + o];
        for (int64_t j = 0; j < I; ++j)
          s += act[size_t(j)] *
               dn[mx4 ? (size_t(e) * h + o) * size_t(I) + size_t(j) : (size_t(e * I + j)) * h + o];
        y[o] += w * s;
      }
    }
    return y;
  }

  const Checkpoint& c_;
  const nlohmann::json& cfg_;
  std::vector<std::array<int64_t, 3>> mpos_;  // M-RoPE positions per token (empty: 1-D, t)
  std::vector<int64_t> msec_;
  RefOverrides o_;
};

}  // namespace onboard::hftest

#include "tests/backends/hf_reference_k3.h"   // Reference::K3LatentRouted, K3MlaGate
#include "tests/backends/hf_reference_kda.h"  // Reference::Kda
