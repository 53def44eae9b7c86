// examples/mlp/model.h: an MLP classifier for 28x28 images and 10 classes.
// Shapes: images [B, 784] (f32 in [0, 1]), labels [B] (i32); logits [B, 10].
#pragma once

#include "dsl/tessel.h"

namespace mlp {

struct Config {
  int64_t pixels = 28 * 28;
  int64_t hidden = 256;
  int64_t classes = 10;
};

/// Two hidden ReLU layers: pixels -> hidden -> hidden -> classes.
struct Mlp : tessel::Model {
  Config cfg;
  tessel::Linear fc1{this, "fc1", cfg.pixels, cfg.hidden};
  tessel::Linear fc2{this, "fc2", cfg.hidden, cfg.hidden};
  tessel::Linear head{this, "head", cfg.hidden, cfg.classes};

  explicit Mlp(Config c) : cfg(c) {}

  tessel::Tensor logits(const tessel::Tensor& images) const {
    return head(tessel::relu(fc2(tessel::relu(fc1(images)))));
  }
};

/// Inputs "images" [B, pixels] and "labels" [B]; loss = mean cross-entropy; logits as the
/// second output (for accuracy).
inline void build(Mlp& model, int64_t batch) {
  auto images = model.input("images", {batch, model.cfg.pixels});
  auto labels = model.input("labels", {batch}, tessel::DType::I32);
  auto logits = model.logits(images);
  model.set_loss(tessel::cross_entropy(logits, labels));
  model.add_output("logits", logits);
}

}  // namespace mlp
