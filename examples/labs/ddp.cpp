// tessel-lab-ddp: the DDP lab. A 64 -> 128 -> GELU -> 5 MLP classifier on 1000 synthetic
// samples (examples/labs/Lab.h), global batch 32, AdamW at lr 1e-3, three epochs.
//
// Under `mpirun -np 2 tessel-lab-ddp --plan dp=2` each rank trains on its 16 rows of every
// global batch of 32 (the distributed sampler, reshuffled every epoch), its gradients are
// averaged over the ranks (bucketed all-reduces overlapped with the backward pass), and both
// replicas take the same AdamW step: the run is the one-rank run on the same global batches,
// to within float summation order (test/labs/check_ddp_lab.py checks it).
#include "examples/labs/Lab.h"

int main(int argc, char** argv) {
  CLI::App app{"tessel-lab-ddp: an MLP classifier on synthetic data, for data parallelism (--plan dp=N)",
               "tessel-lab-ddp"};
  lab::Lab trainer(app, {});
  trainer.addHiddenFlag(app, "hidden width H");
  return trainer.runClassifier(argc, argv, "lab-ddp");
}
