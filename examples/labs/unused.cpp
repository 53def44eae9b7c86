// tessel-lab-unused: the unused-parameter exercise. The DDP lab's classifier declares a layer
// "aux" that its forward pass never calls (examples/labs/models.h, WithUnusedLayer).
//
// In PyTorch, DDP (unless told find_unused_parameters=True) waits in vain for such a
// parameter's gradient: the bucket holding it is never reduced, and the next iteration stops
// with an error. torch.optim.AdamW skips a parameter whose .grad is None.
// Tessel knows at compile time that the loss does not reach "aux.weight" and "aux.bias":
// compiling prints a remark at the layer's declaration (autodiff gives them an explicit zero
// gradient), no rank all-reduces them, so every rank's buckets agree and nothing hangs, and
// the optimizer leaves them exactly as initialised: no update, no weight decay (0.1 here, so
// decay would show), no optimizer state. test/labs/check_unused_lab.py checks dp=2 against one
// rank and the exported "aux" parameters bitwise against their initial values.
#include "examples/labs/Lab.h"

int main(int argc, char** argv) {
  CLI::App app{"tessel-lab-unused: a classifier with a layer its loss never reaches, under data parallelism",
               "tessel-lab-unused"};
  lab::Lab trainer(app, {.weightDecay = 0.1});
  trainer.addHiddenFlag(app, "hidden width H");
  return trainer.run(
      argc, argv, "lab-unused",
      [&] {
        const lab::Sizes s = trainer.sizes();
        return fmt::format("{} -> {} -> GELU -> {} (and an unused {} -> {} layer)", s.features, s.hidden, s.classes,
                           s.hidden, s.classes);
      },
      [&] { return nlohmann::json{{"hidden", trainer.size.hidden}}; },
      [&](const tessel::CompileOptions& o) {
        lab::WithUnusedLayer model(trainer.sizes());
        lab::build(model, trainer.flags.batch);
        return model.compile(o);
      });
}
