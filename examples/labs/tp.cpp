// tessel-lab-tp: the tensor-parallel lab. The DDP lab's MLP F -> H -> GELU -> K
// (examples/labs/models.h, Classifier), 256 wide, whose layers Megatron-LM splits over the tp
// ranks:
//   fc    column-parallel: weight [H, F] split on its output dimension; each rank computes its
//         H/tp hidden units, and GELU needs nothing from the other ranks;
//   head  row-parallel: weight [K, H] split on its input dimension; each rank's product is a
//         partial sum of the logits, and one all-reduce over tp adds them up.
// The input features are replicated and are not differentiated, so that all-reduce is the
// only one of the layers in a training step (--explain lists the step's collectives; the other
// is global-norm clipping's all-gather of the ranks' gradient norms). The model names no
// layout: --plan tp=N makes the compiler's tensor-parallel pass (passes/TensorParallel.cpp)
// find the linear -> GELU -> linear pair and split it so, and --explain prints the result.
#include "examples/labs/Lab.h"

int main(int argc, char** argv) {
  CLI::App app{"tessel-lab-tp: a column-parallel then row-parallel MLP on synthetic data (--plan tp=N)",
               "tessel-lab-tp"};
  lab::Lab trainer(app, {});
  trainer.size.hidden = 256;
  trainer.addHiddenFlag(app, "hidden width H (split over the tp ranks)");
  // Tensor parallelism alone: one all-reduce of the [B, K] f32 partial logits per step, and
  // clipping's all-gather of the tp ranks' gradient norms (one f32 each).
  trainer.communication = [&](const tessel::Plan& plan) -> std::optional<tessel::trainer::CommunicationFormula> {
    if (plan.tp() == 1 || plan.dp() != 1 || plan.microsteps() != 1) return std::nullopt;
    const int64_t b = trainer.flags.batch, k = trainer.data.options.classes;
    return tessel::trainer::CommunicationFormula{.allReduce = fmt::format("B K x 4 with B={} K={}", b, k),
                                                 .allGather = fmt::format("tp x 4 with tp={}", plan.tp()),
                                                 .allReduceBytes = b * k * 4,
                                                 .allGatherBytes = plan.tp() * 4};
  };
  return trainer.runClassifier(argc, argv, "lab-tp");
}
