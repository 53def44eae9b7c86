# lit configuration of Tessel's FileCheck tests. Tools (tessel-opt, FileCheck) are found
# on PATH, which the site config points at the build's bin/ and LLVM 22's bin/.
import os
import lit.formats

config.name = "Tessel"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.tessel_lit_build_dir

config.environment["PATH"] = os.pathsep.join(
    [config.tessel_tools_dir, os.path.dirname(config.filecheck), config.environment.get("PATH", "")])

# %shared_data: the folder of real data for tests (tinyshakespeare.txt), beside the checkout.
config.substitutions.append(("%shared_data", config.tessel_shared_data))

# %tools_dir: the build's bin/ (for tests that inspect a binary, e.g. ldd tessel-run).
config.substitutions.append(("%tools_dir", config.tessel_tools_dir))
