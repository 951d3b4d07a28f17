// KDA chunked form in LibTorch ops (see kda_chunked.h for shapes).
// Legend: B batch, T tokens, H heads, K key dim, V value dim, N chunks, C chunk length.
#include "backends/kda_chunked.h"

#include <vector>

namespace onboard::backends {

at::Tensor KdaChunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const at::Tensor& g, const at::Tensor& beta, int64_t chunk) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), K = q.size(3), V = v.size(3);
  const int64_t C = chunk, N = (T + C - 1) / C, pad = N * C - T;
  // Step 1: [B,T,H,*] -> [B,H,N,C,*]; padded tail tokens have k = v = beta = 0 and g = 0, so they
  // change nothing before them (causal).
  auto blocks = [&](const at::Tensor& x) {
    at::Tensor t = x.transpose(1, 2);  // [B,H,T,*]
    if (pad > 0) t = at::constant_pad_nd(t, {0, 0, 0, pad});
    return t.reshape({B, H, N, C, t.size(-1)});
  };
  at::Tensor qc = blocks(q), kc = blocks(k), vc = blocks(v), gc = blocks(g);
  at::Tensor bt = beta.transpose(1, 2);  // [B,H,T]
  if (pad > 0) bt = at::constant_pad_nd(bt, {0, pad});
  bt = bt.reshape({B, H, N, C});

  // Step 2: in-chunk cumulative decay G and the pairwise decay exp(G[c]-G[i]) for c >= i.
  at::Tensor G = gc.cumsum(3);                                              // [B,H,N,C,K]
  at::Tensor diff = G.unsqueeze(4) - G.unsqueeze(3);                        // [B,H,N,C(c),C(i),K]
  at::Tensor incl = at::ones({C, C}, q.options().dtype(at::kBool)).tril();  // c >= i
  at::Tensor strict = at::ones({C, C}, q.options().dtype(at::kBool)).tril(-1);
  at::Tensor decay = diff.masked_fill(incl.logical_not().unsqueeze(-1), -INFINITY).exp();

  // Step 3: L[c,i] = beta_c sum_d k_c k_i exp(G_c - G_i) (strict), and the in-chunk q.k scores.
  at::Tensor kk = (kc.unsqueeze(4) * kc.unsqueeze(3) * decay).sum(-1);      // [B,H,N,C,C]
  at::Tensor L = (kk * bt.unsqueeze(-1)).masked_fill(strict.logical_not(), 0.0);
  at::Tensor attn = (qc.unsqueeze(4) * kc.unsqueeze(3) * decay).sum(-1);    // incl. (decay = 0 above)

  // Step 4: A = (I + L)^-1 diag(beta) by forward substitution; W = A (exp(G) k), U = A v.
  at::Tensor eye = at::eye(C, q.options());
  at::Tensor A = at::linalg_solve_triangular(eye + L, at::diag_embed(bt), /*upper=*/false,
                                             /*left=*/true, /*unitriangular=*/true);
  at::Tensor eG = G.exp();
  at::Tensor W = at::matmul(A, eG * kc);  // [B,H,N,C,K]
  at::Tensor U = at::matmul(A, vc);       // [B,H,N,C,V]

  // Step 5: across chunks, sequentially.
  at::Tensor S = at::zeros({B, H, K, V}, q.options());
  std::vector<at::Tensor> outs;
  outs.reserve(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    at::Tensor Gn = G.select(2, n), eGn = eG.select(2, n);
    at::Tensor vp = U.select(2, n) - at::matmul(W.select(2, n), S);                 // [B,H,C,V]
    outs.push_back(at::matmul(eGn * qc.select(2, n), S) + at::matmul(attn.select(2, n), vp));
    at::Tensor glast = Gn.select(2, C - 1);                                          // [B,H,K]
    at::Tensor kdec = (glast.unsqueeze(2) - Gn).exp() * kc.select(2, n);             // [B,H,C,K]
    S = glast.exp().unsqueeze(-1) * S + at::matmul(kdec.transpose(-1, -2), vp);
  }
  at::Tensor o = at::stack(outs, 2).reshape({B, H, N * C, V});
  if (pad > 0) o = o.narrow(2, 0, T);
  return o.transpose(1, 2).contiguous();  // [B,T,H,V]
}

at::Tensor KdaRecurrent(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const at::Tensor& g, const at::Tensor& beta) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), K = q.size(3), V = v.size(3);
  at::Tensor S = at::zeros({B, H, K, V}, q.options());
  std::vector<at::Tensor> outs;
  for (int64_t t = 0; t < T; ++t) {
    at::Tensor kt = k.select(1, t), qt = q.select(1, t), vt = v.select(1, t);  // [B,H,*]
    S = g.select(1, t).exp().unsqueeze(-1) * S;
    at::Tensor u = vt - at::matmul(kt.unsqueeze(-2), S).squeeze(-2);            // [B,H,V]
    S = S + beta.select(1, t).unsqueeze(-1).unsqueeze(-1) * kt.unsqueeze(-1) * u.unsqueeze(-2);
    outs.push_back(at::matmul(qt.unsqueeze(-2), S).squeeze(-2));
  }
  return at::stack(outs, 1);  // [B,T,H,V]
}

}  // namespace onboard::backends
