// examples/gpt/model.h: WHAT the GPT computes. It names no device, mesh or collective.
//
// GPT-2 architecture (Radford et al. 2019) at byte level: token plus learned position
// embedding, L pre-LayerNorm blocks of causal self-attention and a GELU MLP with residual
// connections, a final LayerNorm, and an LM head tied to the token embedding.
// Shapes: tokens, targets [B, T] (i32); activations x [B, T, C]; logits [B, T, V].
#pragma once

#include "dsl/tessel.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace gpt {

/// Model size. V = 256 (bytes).
struct Config {
  int64_t layers = 2;     // L
  int64_t channels = 64;  // C
  int64_t heads = 4;      // NH
  int64_t seq = 32;       // T, also the number of learned positions
  int64_t vocab = 256;    // V
};

/// One pre-LN transformer block: x + attn(ln1(x)), then x + mlp(ln2(x)).
struct Block : tessel::Module {
  Config cfg;
  // GPT-2 scales the init of the residual projections by 1/sqrt(2L).
  double residualStd() const { return 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.layers)); }

  tessel::LayerNorm ln1{this, "ln1", cfg.channels};
  tessel::Linear qkv{this, "attn.qkv", cfg.channels, 3 * cfg.channels};
  tessel::Linear proj{this, "attn.proj", cfg.channels, cfg.channels, {.std = residualStd()}};
  tessel::LayerNorm ln2{this, "ln2", cfg.channels};
  tessel::Linear fc{this, "mlp.fc", cfg.channels, 4 * cfg.channels};
  tessel::Linear fcProj{this, "mlp.proj", 4 * cfg.channels, cfg.channels, {.std = residualStd()}};

  Block(tessel::Module* parent, std::string name, Config c)
      : tessel::Module(parent, std::move(name)), cfg(c) {}

  tessel::Tensor operator()(tessel::Tensor x) const {
    auto scope = this->scope();
    x = x + proj(tessel::causal_attention(qkv(ln1(x)), cfg.heads));
    return x + fcProj(tessel::gelu(fc(ln2(x))));
  }
};

/// The whole model. forward() returns the logits [B, T, V].
struct GPT : tessel::Model {
  Config cfg;
  tessel::Embedding wte{this, "wte", cfg.vocab, cfg.channels};
  tessel::Embedding wpe{this, "wpe", cfg.seq, cfg.channels};
  std::vector<std::unique_ptr<Block>> blocks;
  tessel::LayerNorm lnF{this, "ln_f", cfg.channels};

  explicit GPT(Config c) : cfg(c) {
    for (int64_t i = 0; i < cfg.layers; ++i)
      blocks.push_back(std::make_unique<Block>(this, "blocks." + std::to_string(i), cfg));
  }

  tessel::Tensor logits(const tessel::Tensor& tokens) const {
    tessel::Tensor x = wte(tokens) + wpe.weight();  // [B, T, C] + [T, C]
    for (const auto& block : blocks) x = (*block)(x);
    // LM head tied to the token embedding: [B, T, C] x [V, C]^T -> [B, T, V].
    return tessel::matmul(lnF(x), wte.weight(), {.transpose_rhs = true});
  }
};

/// Builds the training graph on batch B: inputs "tokens" and "targets" [B, T] (i32), the
/// mean cross-entropy as the loss and, if `withLogits`, the logits as a second output.
inline void build(GPT& model, int64_t batch, bool withLogits = false) {
  auto tokens = model.input("tokens", {batch, model.cfg.seq}, tessel::DType::I32);
  auto targets = model.input("targets", {batch, model.cfg.seq}, tessel::DType::I32);
  auto logits = model.logits(tokens);
  model.set_loss(tessel::cross_entropy(logits, targets));
  if (withLogits) model.add_output("logits", logits);
}

/// Builds the sampling graph: input "tokens" [1, T] (i32), output "logits" [1, T, V]. No
/// loss, so it compiles forward-only; parameters are shared with a training model by name.
inline void buildSampler(GPT& model) {
  auto tokens = model.input("tokens", {1, model.cfg.seq}, tessel::DType::I32);
  model.add_output("logits", model.logits(tokens));
}

}  // namespace gpt
