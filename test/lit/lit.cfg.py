# lit configuration of Tessel's FileCheck tests. Tools (tessel-opt, tessel-translate,
# FileCheck) are found on PATH, which the site config points at the build's bin/ and
# LLVM 22's bin/.
import ctypes
import os
import lit.formats

config.name = "Tessel"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.tessel_lit_build_dir

config.environment["PATH"] = os.pathsep.join(
    [config.tessel_tools_dir, os.path.dirname(config.filecheck), config.environment.get("PATH", "")])
# Captured variables do not leak from one CHECK-LABEL block into the next.
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"

# %shared_data: the folder of real data for tests (tinyshakespeare.txt), beside the checkout.
config.substitutions.append(("%shared_data", config.tessel_shared_data))

# %test_python: the test venv's python (scripts/setup.sh), which has the safetensors package;
# also in the environment as TESSEL_TEST_PYTHON for the scripts the tests run.
config.substitutions.append(("%test_python", config.tessel_test_python))
config.environment["TESSEL_TEST_PYTHON"] = config.tessel_test_python

# %tools_dir: the build's bin/ (for tests that inspect a binary, e.g. ldd tessel-run).
config.substitutions.append(("%tools_dir", config.tessel_tools_dir))


def cuda_probe():
    """What runtime/cuda/Driver.cpp's probe asks, from Python: can the CUDA driver
    (libcuda.so.1, never the toolkit's stub) be opened, and does it initialise with at least
    one device? Returns (driver, gpu)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False, False
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return True, False
    return True, count.value > 0


# Features for what this machine has, so one suite passes with and without a GPU:
#   cuda-driver  the NVIDIA driver loads;
#   gpu          it also has a usable device (--device cuda works).
# Tests mark themselves with `REQUIRES: gpu` or `UNSUPPORTED: gpu`. TESSEL_LIT_GPU=0 or 1
# overrides the probe (e.g. to run the no-GPU expectations on a GPU node).
driver, gpu = cuda_probe()
override = os.environ.get("TESSEL_LIT_GPU")
if override in ("0", "1"):
    gpu = override == "1"
    driver = driver or gpu
if driver:
    config.available_features.add("cuda-driver")
if gpu:
    config.available_features.add("gpu")
