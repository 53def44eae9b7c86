// tessel-lab-fsdp: the FSDP lab. A stack of transformer-like blocks (examples/labs/models.h,
// BlockStack: a projection, then a 4x GELU MLP, each with a residual) on the synthetic data.
//
// The blocks are "blocks.<i>", so under an fsdp plan each block is one FSDP unit (the
// trainer's default for models whose blocks are so named; --fsdp-unit overrides it): its
// parameters are all-gathered in one collective before the block runs, freed after it, and
// gathered again for its backward pass, whose gradients are reduce-scattered to their shards.
// --precision bf16 computes in bfloat16 on f32 master weights, and
// --activation-checkpointing full recomputes each block's activations in the backward pass
// instead of keeping them. --explain prints the units' collectives and the memory per rank.
#include "examples/labs/Lab.h"

int main(int argc, char** argv) {
  CLI::App app{"tessel-lab-fsdp: transformer-like blocks on synthetic data, for FSDP (--plan fsdp=N), bf16 and "
               "activation checkpointing", "tessel-lab-fsdp"};
  // A batch of 256 rows makes the activations, not the parameters, most of a step's
  // temporaries, so that checkpointing shows: the activation arena per rank of fsdp=2 in bf16
  // is 1.27 MiB, and 0.89 MiB with --activation-checkpointing full (--explain). Three epochs
  // of 4096 samples.
  tessel::SyntheticOptions data;
  data.samples = 4096;
  data.heldOut = 512;
  lab::Lab trainer(app, {.batch = 256, .steps = 48, .data = data});
  trainer.size.hidden = 64;
  trainer.size.layers = 4;
  trainer.addHiddenFlag(app, "channels C of the blocks (their MLP is 4 C wide)");
  app.add_option("--layers", trainer.size.layers, "blocks L")->capture_default_str()
      ->check(tessel::trainer::integerIn(1, 1024));
  // The blocks are "blocks.<i>": FSDP units and activation checkpointing default to them.
  trainer.flags.transformer = true;
  return trainer.run(
      argc, argv, "lab-fsdp",
      [&] {
        const lab::Sizes s = trainer.sizes();
        return fmt::format("{} -> {} blocks of C={} (MLP {}) -> {}", s.features, s.layers, s.hidden, 4 * s.hidden,
                           s.classes);
      },
      [&] { return nlohmann::json{{"channels", trainer.size.hidden}, {"layers", trainer.size.layers}}; },
      [&](const tessel::CompileOptions& o) {
        lab::BlockStack model(trainer.sizes());
        lab::build(model, trainer.flags.batch);
        return model.compile(o);
      });
}
