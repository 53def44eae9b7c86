// A small Llama-style attention model for the tests of rope and grouped-query attention
// (NativeAttentionTest.cpp, TensorParallelAttentionTest.cpp): a byte embedding, one block
// x + wo(attn(rope(wq x), rope(wk x), wv x)) with bias-free projections, and an LM head tied to
// the embedding. Inputs "tokens" and "targets" [B, T] (i32); the loss is the mean
// cross-entropy.
#pragma once

#include "dsl/tessel.h"

namespace tessel::test {

struct TinyLlamaAttention : Model {
  int64_t heads, kvHeads, headSize;
  Embedding wte;
  Linear wq, wk, wv, wo;

  TinyLlamaAttention(int64_t heads, int64_t kvHeads, int64_t headSize)
      : heads(heads),
        kvHeads(kvHeads),
        headSize(headSize),
        wte(this, "wte", 256, heads * headSize),
        wq(this, "attention.wq", heads * headSize, heads * headSize, {.bias = false}),
        wk(this, "attention.wk", heads * headSize, kvHeads * headSize, {.bias = false}),
        wv(this, "attention.wv", heads * headSize, kvHeads * headSize, {.bias = false}),
        wo(this, "attention.wo", heads * headSize, heads * headSize, {.bias = false}) {}

  void build(int64_t batch, int64_t seq) {
    auto tokens = input("tokens", {batch, seq}, DType::I32);
    auto targets = input("targets", {batch, seq}, DType::I32);
    Tensor x = wte(tokens);
    Tensor a = causal_attention(rope(wq(x), heads), rope(wk(x), kvHeads), wv(x), heads, kvHeads);
    x = x + wo(a);
    set_loss(cross_entropy(matmul(x, wte.weight(), {.transpose_rhs = true}), targets));
  }
};

}  // namespace tessel::test
