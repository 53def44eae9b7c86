// examples/labs/models.h: the labs' models (README.md says what each teaches).
// Shapes: features [B, F] (f32), labels [B] (i32) in [0, K); logits [B, K]; loss = mean
// cross-entropy. Parameter names are the DSL paths ("fc.weight", "blocks.1.mlp.fc.bias").
#pragma once

#include "dsl/tessel.h"

#include <memory>
#include <vector>

namespace lab {

/// The sizes a lab's model reads from its flags.
struct Sizes {
  int64_t features = 64;  // F
  int64_t hidden = 128;   // H: the MLP's hidden width (the FSDP lab: the channels C)
  int64_t classes = 5;    // K
  int64_t layers = 2;     // L: blocks of the FSDP lab
};

/// The DDP lab's and the tensor-parallel lab's MLP: F -> H -> GELU -> K. Under --plan tp=N the
/// compiler's tensor-parallel pass (passes/TensorParallel.cpp) makes fc column-parallel and head
/// row-parallel.
struct Classifier : tessel::Model {
  Sizes size;
  tessel::Linear fc{this, "fc", size.features, size.hidden};
  tessel::Linear head{this, "head", size.hidden, size.classes};

  explicit Classifier(Sizes s) : size(s) {}
  tessel::Tensor logits(const tessel::Tensor& x) const { return head(tessel::gelu(fc(x))); }
};

/// The unused-parameter exercise: the classifier plus a layer it declares and never calls
/// (an auxiliary head left over from an experiment, say). No loss reaches "aux.weight" or
/// "aux.bias": their gradient is zero, so training leaves them exactly as initialised.
/// The layer is made in the constructor's initializer list, so that its parameters' location,
/// where the remark points, is its own line: GCC gives std::source_location::current() in a
/// default member initializer the constructor's line instead.
struct WithUnusedLayer : Classifier {
  tessel::Linear aux;

  explicit WithUnusedLayer(Sizes s)
      : Classifier(s),
        aux(this, "aux", size.hidden, size.classes) {}  // never called: no gradient reaches it
};

/// One block of the FSDP lab (pre-norm, transformer-like with a projection where attention
/// would be): x + proj(ln1(x)), then + mlp.proj(gelu(mlp.fc(ln2(.)))) with a 4x wide MLP.
/// x: [B, C].
struct Block : tessel::Module {
  int64_t channels;
  tessel::LayerNorm ln1{this, "ln1", channels}, ln2{this, "ln2", channels};
  tessel::Linear proj{this, "proj", channels, channels};
  tessel::Linear fc{this, "mlp.fc", channels, 4 * channels};
  tessel::Linear fcProj{this, "mlp.proj", 4 * channels, channels};

  Block(tessel::Module* parent, const std::string& name, int64_t c) : tessel::Module(parent, name), channels(c) {}
  tessel::Tensor operator()(tessel::Tensor x) const {
    auto guard = scope();
    x = x + proj(ln1(x));
    return x + fcProj(tessel::gelu(fc(ln2(x))));
  }
};

/// The FSDP lab: stem F -> C, L blocks "blocks.<i>" (the FSDP units and the checkpointed
/// modules), a final norm and the head C -> K.
struct BlockStack : tessel::Model {
  Sizes size;
  tessel::Linear stem{this, "stem", size.features, size.hidden};
  std::vector<std::unique_ptr<Block>> blocks;
  tessel::LayerNorm lnF{this, "ln_f", size.hidden};
  tessel::Linear head{this, "head", size.hidden, size.classes};

  explicit BlockStack(Sizes s) : size(s) {
    for (int64_t i = 0; i < s.layers; ++i)
      blocks.push_back(std::make_unique<Block>(this, "blocks." + std::to_string(i), s.hidden));
  }
  tessel::Tensor logits(const tessel::Tensor& x) const {
    tessel::Tensor h = stem(x);
    for (const auto& b : blocks) h = (*b)(h);
    return head(lnF(h));
  }
};

/// Inputs "features" [B, F] and "labels" [B] (the feeders fill index 0, then 1), the loss,
/// and the logits as a second output.
template <class M>
void build(M& model, int64_t batch) {
  auto x = model.input("features", {batch, model.size.features});
  auto y = model.input("labels", {batch}, tessel::DType::I32);
  auto logits = model.logits(x);
  model.set_loss(tessel::cross_entropy(logits, y));
  model.add_output("logits", logits);
}

}  // namespace lab
