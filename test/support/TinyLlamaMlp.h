// A small Llama-style model without attention, built from the ops of the Llama block that are
// not attention (RMSNorm, swiglu, untied head): tokens -> embedding -> MLP blocks
// x + w2(swiglu(w1(n(x)), w3(n(x)))) -> RMSNorm -> head -> cross-entropy. Shared by the native
// and SIMT tests of those ops (NativeNormTest.cpp, SimtExecutorTest.cpp).
#pragma once

#include "dsl/tessel.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessel::test {

/// One MLP sublayer "blocks.<i>" (so that a plan can checkpoint it): C channels, H hidden.
struct LlamaMlpBlock : Module {
  RMSNorm norm;
  Linear w1, w3, w2;
  LlamaMlpBlock(Module* parent, std::string name, int64_t c, int64_t h)
      : Module(parent, std::move(name)),
        norm(this, "ffn_norm", c),
        w1(this, "w1", c, h, {.bias = false}),
        w3(this, "w3", c, h, {.bias = false}),
        w2(this, "w2", h, c, {.bias = false}) {}
  Tensor operator()(const Tensor& x) const {
    Scope scope(*this);
    Tensor h = norm(x);
    return x + w2(swiglu(w1(h), w3(h)));
  }
};

/// `layers` blocks of width C, hidden H, over a vocabulary of V.
struct TinyLlamaMlp : Model {
  int64_t vocab, channels;
  Embedding tok;
  std::vector<std::unique_ptr<LlamaMlpBlock>> blocks;
  RMSNorm norm;
  Linear head;

  TinyLlamaMlp(int64_t layers, int64_t v, int64_t c, int64_t h)
      : vocab(v), channels(c), tok(this, "tok_embeddings", v, c), norm(this, "norm", c),
        head(this, "output", c, v, {.bias = false}) {
    for (int64_t i = 0; i < layers; ++i)
      blocks.push_back(std::make_unique<LlamaMlpBlock>(this, "blocks." + std::to_string(i), c, h));
  }

  /// Inputs "tokens" and "targets" [batch, seq] (i32) and the loss.
  void build(int64_t batch, int64_t seq) {
    Tensor tokens = input("tokens", {batch, seq}, DType::I32);
    Tensor targets = input("targets", {batch, seq}, DType::I32);
    Tensor x = tok(tokens);
    for (const auto& b : blocks) x = (*b)(x);
    set_loss(cross_entropy(head(norm(x)), targets));
  }
};

}  // namespace tessel::test
