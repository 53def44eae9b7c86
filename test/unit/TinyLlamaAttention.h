// A small Llama-style attention model for the tests of rope and grouped-query attention
// (NativeAttentionTest.cpp, TensorParallelAttentionTest.cpp): a byte embedding, one block
// "blocks.0": x + wo(attn(rope(wq x), rope(wk x), wv x)) with bias-free projections, and an
// LM head tied to the embedding. Inputs "tokens" and "targets" [B, T] (i32); the loss is the
// mean cross-entropy.
#pragma once

#include "dsl/tessel.h"

#include <memory>

namespace tessel::test {

struct AttentionBlock : Module {
  int64_t heads, kvHeads;
  Linear wq, wk, wv, wo;

  AttentionBlock(Module* parent, std::string name, int64_t heads, int64_t kvHeads, int64_t headSize)
      : Module(parent, std::move(name)),
        heads(heads),
        kvHeads(kvHeads),
        wq(this, "attention.wq", heads * headSize, heads * headSize, {.bias = false}),
        wk(this, "attention.wk", heads * headSize, kvHeads * headSize, {.bias = false}),
        wv(this, "attention.wv", heads * headSize, kvHeads * headSize, {.bias = false}),
        wo(this, "attention.wo", heads * headSize, heads * headSize, {.bias = false}) {}

  Tensor operator()(const Tensor& x) const {
    auto s = scope();
    Tensor a = causal_attention(rope(wq(x), heads), rope(wk(x), kvHeads), wv(x), heads, kvHeads);
    return x + wo(a);
  }
};

struct TinyLlamaAttention : Model {
  Embedding wte;
  std::unique_ptr<AttentionBlock> block;

  TinyLlamaAttention(int64_t heads, int64_t kvHeads, int64_t headSize)
      : wte(this, "wte", 256, heads * headSize),
        block(std::make_unique<AttentionBlock>(this, "blocks.0", heads, kvHeads, headSize)) {}

  void build(int64_t batch, int64_t seq) {
    auto tokens = input("tokens", {batch, seq}, DType::I32);
    auto targets = input("targets", {batch, seq}, DType::I32);
    Tensor x = (*block)(wte(tokens));
    set_loss(cross_entropy(matmul(x, wte.weight(), {.transpose_rhs = true}), targets));
  }
};

}  // namespace tessel::test
