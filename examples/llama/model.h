// examples/llama/model.h: WHAT the Llama computes. It names no device, mesh or collective.
//
// The Llama architecture (Touvron et al. 2023) at byte level: a token embedding (no learned
// positions: rotary position embeddings turn q and k inside every attention), L pre-norm
// blocks of grouped-query causal attention and a SwiGLU MLP with residual connections, RMS
// norms without biases, a final RMS norm and an LM head of its own (untied).
// Shapes: tokens, targets [B, T] (i32); activations x [B, T, C]; logits [B, T, V];
// q [B, T, NH * D], k and v [B, T, NKV * D] with D = C / NH.
#pragma once

#include "dsl/tessel.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llama {

/// Model size. V = 256 (bytes). heads must divide channels and kv_heads must divide heads
/// (causal_attention refuses otherwise, at the block's line); D = channels / heads must be
/// even (rope pairs the halves of a head).
struct Config {
  int64_t layers = 2;        // L
  int64_t channels = 64;     // C
  int64_t heads = 4;         // NH, query heads
  int64_t kv_heads = 2;      // NKV, key/value heads (NH / NKV query heads share one)
  int64_t hidden = 256;      // H, the SwiGLU width
  int64_t seq = 32;          // T
  int64_t vocab = 256;       // V
  double rope_theta = 10000.0;  // RoPE base: head pair i turns by t * theta^(-2i/D)
  double norm_eps = 1e-5;       // RMS norms' epsilon
};

/// --kv-heads when not given: NH / 2 when NH is even (grouped-query attention with groups of
/// two), else NH (multi-head attention).
inline int64_t defaultKvHeads(int64_t heads) { return heads % 2 == 0 ? heads / 2 : heads; }

/// --hidden when not given: Llama's SwiGLU width rule, 2/3 of the 4C a GELU MLP would have
/// (three matrices instead of two at about the same parameter count), rounded up to a
/// multiple of 128 (C = 128: 384).
inline int64_t defaultHidden(int64_t channels) {
  const int64_t twoThirds = (2 * 4 * channels + 2) / 3;  // ceil(8C / 3)
  return (twoThirds + 127) / 128 * 128;
}

/// One pre-norm block: h = x + wo(attn(rope(wq(n1 x)), rope(wk(n1 x)), wv(n1 x))), then
/// h + w2(swiglu(w1(n2 h), w3(n2 h))). No biases.
struct Block : tessel::Module {
  Config cfg;
  // The residual projections' init std is scaled by 1/sqrt(2L), as GPT-2 does, so that the
  // residual stream's variance at init does not grow with depth.
  double residualStd() const { return 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.layers)); }
  int64_t headDim() const { return cfg.channels / cfg.heads; }

  tessel::RMSNorm attentionNorm{this, "attention_norm", cfg.channels, cfg.norm_eps};
  tessel::Linear wq{this, "attention.wq", cfg.channels, cfg.heads * headDim(), {.bias = false}};
  tessel::Linear wk{this, "attention.wk", cfg.channels, cfg.kv_heads * headDim(), {.bias = false}};
  tessel::Linear wv{this, "attention.wv", cfg.channels, cfg.kv_heads * headDim(), {.bias = false}};
  tessel::Linear wo{this, "attention.wo", cfg.heads * headDim(), cfg.channels,
                    {.bias = false, .std = residualStd()}};
  tessel::RMSNorm ffnNorm{this, "ffn_norm", cfg.channels, cfg.norm_eps};
  tessel::Linear w1{this, "feed_forward.w1", cfg.channels, cfg.hidden, {.bias = false}};  // gate
  tessel::Linear w3{this, "feed_forward.w3", cfg.channels, cfg.hidden, {.bias = false}};  // up
  tessel::Linear w2{this, "feed_forward.w2", cfg.hidden, cfg.channels,                    // down
                    {.bias = false, .std = residualStd()}};

  Block(tessel::Module* parent, std::string name, Config c)
      : tessel::Module(parent, std::move(name)), cfg(c) {}

  tessel::Tensor operator()(tessel::Tensor x) const {
    auto scope = this->scope();
    tessel::Tensor n1 = attentionNorm(x);
    tessel::Tensor q = tessel::rope(wq(n1), cfg.heads, cfg.rope_theta);
    tessel::Tensor k = tessel::rope(wk(n1), cfg.kv_heads, cfg.rope_theta);
    x = x + wo(tessel::causal_attention(q, k, wv(n1), cfg.heads, cfg.kv_heads));
    tessel::Tensor n2 = ffnNorm(x);
    return x + w2(tessel::swiglu(w1(n2), w3(n2)));
  }
};

/// The whole model. logits() returns [B, T, V].
struct Llama : tessel::Model {
  Config cfg;
  tessel::Embedding tokEmbeddings{this, "tok_embeddings", cfg.vocab, cfg.channels};
  std::vector<std::unique_ptr<Block>> blocks;
  tessel::RMSNorm norm{this, "norm", cfg.channels, cfg.norm_eps};
  tessel::Linear output{this, "output", cfg.channels, cfg.vocab, {.bias = false}};  // untied

  explicit Llama(Config c) : cfg(c) {
    for (int64_t i = 0; i < cfg.layers; ++i)
      blocks.push_back(std::make_unique<Block>(this, "blocks." + std::to_string(i), cfg));
  }

  tessel::Tensor logits(const tessel::Tensor& tokens) const {
    tessel::Tensor x = tokEmbeddings(tokens);  // [B, T, C]; positions enter through rope
    for (const auto& block : blocks) x = (*block)(x);
    return output(norm(x));
  }
};

/// Builds the training graph on batch B: inputs "tokens" and "targets" [B, T] (i32), the
/// mean cross-entropy as the loss and, if `withLogits`, the logits as a second output.
inline void build(Llama& model, int64_t batch, bool withLogits = false) {
  auto tokens = model.input("tokens", {batch, model.cfg.seq}, tessel::DType::I32);
  auto targets = model.input("targets", {batch, model.cfg.seq}, tessel::DType::I32);
  auto logits = model.logits(tokens);
  model.set_loss(tessel::cross_entropy(logits, targets));
  if (withLogits) model.add_output("logits", logits);
}

/// Builds the sampling graph: input "tokens" [1, T] (i32), output "logits" [1, T, V]. No
/// loss, so it compiles forward-only; parameters are shared with a training model by name.
inline void buildSampler(Llama& model) {
  auto tokens = model.input("tokens", {1, model.cfg.seq}, tessel::DType::I32);
  model.add_output("logits", model.logits(tokens));
}

}  // namespace llama
