// Checkpoints across processes (runtime/ckpt/Checkpoint.h) under mpirun: the write plan agreed
// over MPI, the file-marker commit between processes, asynchronous saves while the buffers
// change, and loads under another plan and world size.
//   ckpt_mpi_test save LAYOUT ROOT  (as many ranks as LAYOUT has) writes two asynchronous
//     checkpoints into a fresh ROOT: step 3 (values of save 1) and step 6 (save 2), changing
//     the buffers after each save() returns, then checks both load back under LAYOUT;
//   ckpt_mpi_test load LAYOUT ROOT  loads ROOT (latest: step 6) and ROOT/step_00000003 under
//     LAYOUT and checks every buffer bit for bit.
// LAYOUT is one of test/unit/CkptTestModel.h's layouts.
#include "test/mpi/RankMain.h"
#include "test/unit/CkptTestModel.h"

#include "runtime/comm/GatherBytes.h"

#include <cstring>
#include <filesystem>
#include <string>

namespace {

using namespace tessel;

std::string mode, layoutName, root;

/// Loads `path` under the layout and checks it holds save `salt`.
void checkLoad(rt::Communicator& world, const std::string& path, int salt, const std::string& folder) {
  test::HostExecutor ex(test::modelUnder(test::layoutNamed(layoutName)));
  test::fillBuffers(ex, world.rank(), 9);  // anything but the saved values
  const ckpt::LoadResult result = ckpt::loadCheckpoint(ex, &world, path);
  CHECK(std::filesystem::path(result.dir).filename() == folder, "loaded '%s', not %s", result.dir.c_str(),
        folder.c_str());
  const std::string problem = test::loadedProblem(ex, world.rank(), salt);
  CHECK(problem.empty(), "%s", problem.c_str());
}

void run(rt::MpiCommunicator& world) {
  if (mode == "save") {
    if (world.rank() == 0) std::filesystem::remove_all(root);
    rt::allGatherBytes(world, "", "the fresh root");  // nobody starts before it is gone
    test::HostExecutor ex(test::modelUnder(test::layoutNamed(layoutName)));
    ckpt::SaveOptions options;
    options.root = root;
    options.async = true;
    ckpt::Checkpointer ck(ex, &world, options);
    std::vector<std::string> lines;
    for (auto [step, salt] : {std::pair{3, 1}, std::pair{6, 2}}) {
      test::fillBuffers(ex, world.rank(), salt);
      ck.save(step, {{"step", step}});
      test::fillBuffers(ex, world.rank(), 7);  // training goes on while the writer writes
      for (std::string& l : ck.poll()) lines.push_back(std::move(l));
    }
    ck.wait();
    for (std::string& l : ck.poll()) lines.push_back(std::move(l));
    CHECK(lines.size() == (world.rank() == 0 ? 2u : 0u), "%zu durable lines", lines.size());
    for (const std::string& l : lines) std::printf("%s\n", l.c_str());
    rt::allGatherBytes(world, "", "the saves");  // rank 0 has committed both
  }
  checkLoad(world, root, 2, "step_00000006");
  checkLoad(world, root + "/step_00000003", 1, "step_00000003");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || (std::strcmp(argv[1], "save") != 0 && std::strcmp(argv[1], "load") != 0)) {
    std::fprintf(stderr, "usage: ckpt_mpi_test save|load LAYOUT ROOT\n");
    return 2;
  }
  mode = argv[1];
  layoutName = argv[2];
  root = argv[3];
  return test::rankMain("ckpt_mpi_test", test::layoutNamed(layoutName).world, run);
}
