// model.h: a small byte-level transformer, the model of this template project.
//
// Tokens are bytes (V = 256). Each block is pre-LayerNorm causal self-attention and a GELU MLP
// whose residual branches are scaled by learned per-channel gains (LayerScale, Touvron et al.
// 2021, "Going deeper with Image Transformers"), initialised to ones here. The gains are a
// module of this file: the pattern for a layer of your own.
// Shapes: tokens, targets [B, T] (i32); activations [B, T, C]; logits [B, T, V].
#pragma once

#include "dsl/tessel.h"

#include <memory>
#include <string>
#include <vector>

namespace tiny {

/// The model's size.
struct Config {
  int64_t layers = 2;     // L: blocks
  int64_t channels = 64;  // C: width of the residual stream
  int64_t heads = 4;      // NH: attention heads (C must be a multiple)
  int64_t seq = 64;       // T: context length, also the number of learned positions
  int64_t vocab = 256;    // V: bytes
};

/// A learned gain per channel: x [..., C] -> x * gain, with "<path>.gain" [C] starting at ones.
class ResidualGain : public tessel::Module {
 public:
  /// `loc` defaults to the line that constructs the gain, which errors about it name. (GCC
  /// gives a default member initializer, as in Block below, its constructor's line instead.)
  ResidualGain(tessel::Module* parent, std::string name, int64_t channels,
               tessel::Loc loc = tessel::Loc::current())
      : tessel::Module(parent, std::move(name)) {
    declare_parameter("gain", {channels}, tessel::Init::Ones, 0.0, loc);
  }

  /// x [..., C] -> [..., C]. A wrong last dimension is a tessel::ModelError at the caller's line.
  tessel::Tensor operator()(const tessel::Tensor& x, tessel::Loc loc = tessel::Loc::current()) const {
    auto scope = this->scope();  // the ops below carry this module's path in their locations
    return tessel::At(x, loc) * parameter("gain", loc);
  }
};

/// One block: x + gain1 * attn(ln1(x)), then x + gain2 * mlp(ln2(x)).
struct Block : tessel::Module {
  Config cfg;
  tessel::LayerNorm ln1{this, "ln1", cfg.channels};
  tessel::Linear qkv{this, "attn.qkv", cfg.channels, 3 * cfg.channels};
  tessel::Linear proj{this, "attn.proj", cfg.channels, cfg.channels};
  ResidualGain gain1{this, "gain1", cfg.channels};
  tessel::LayerNorm ln2{this, "ln2", cfg.channels};
  tessel::Linear fc{this, "mlp.fc", cfg.channels, 4 * cfg.channels};
  tessel::Linear fcProj{this, "mlp.proj", 4 * cfg.channels, cfg.channels};
  ResidualGain gain2{this, "gain2", cfg.channels};

  Block(tessel::Module* parent, std::string name, Config c) : tessel::Module(parent, std::move(name)), cfg(c) {}

  /// x [B, T, C] -> [B, T, C].
  tessel::Tensor operator()(tessel::Tensor x) const {
    auto scope = this->scope();
    x = x + gain1(proj(tessel::causal_attention(qkv(ln1(x)), cfg.heads)));
    return x + gain2(fcProj(tessel::gelu(fc(ln2(x)))));
  }
};

/// The model: token and position embeddings, L blocks, a final LayerNorm and an LM head tied
/// to the token embedding. Blocks are named "blocks.<i>", which pipeline plans split on.
struct TinyTransformer : tessel::Model {
  Config cfg;
  tessel::Embedding tokens{this, "tokens", cfg.vocab, cfg.channels};
  tessel::Embedding positions{this, "positions", cfg.seq, cfg.channels};
  std::vector<std::unique_ptr<Block>> blocks;
  tessel::LayerNorm lnF{this, "ln_f", cfg.channels};

  explicit TinyTransformer(Config c) : cfg(c) {
    for (int64_t i = 0; i < cfg.layers; ++i)
      blocks.push_back(std::make_unique<Block>(this, "blocks." + std::to_string(i), cfg));
  }

  /// tokens [B, T] (i32) -> logits [B, T, V].
  tessel::Tensor logits(const tessel::Tensor& ids) const {
    tessel::Tensor x = tokens(ids) + positions.weight();  // [B, T, C] + [T, C]
    for (const auto& block : blocks) x = (*block)(x);
    return tessel::matmul(lnF(x), tokens.weight(), {.transpose_rhs = true});
  }
};

/// The training graph on a global batch of B sequences: inputs "tokens" and "targets" [B, T]
/// (i32, targets are the tokens shifted by one) and the mean cross-entropy as the loss.
inline void build(TinyTransformer& model, int64_t batch) {
  auto ids = model.input("tokens", {batch, model.cfg.seq}, tessel::DType::I32);
  auto targets = model.input("targets", {batch, model.cfg.seq}, tessel::DType::I32);
  model.set_loss(tessel::cross_entropy(model.logits(ids), targets));
}

}  // namespace tiny
