// A host-compiler failure names the generated line and the op (and user line) it came from.
#include "codegen/HostCompiler.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace {

const char* kSource =
    "// preamble\n"
    "// tessel.add at loc(\"model.h\":3:4)\n"
    "extern \"C\" void k0(void** args) {\n"
    "  float* out = (float*)args[0];\n"
    "  out[0] = undefined_name;\n"
    "}\n";

TEST(HostCompiler, ExplainsCompileErrorsWithTheOpLocation) {
  std::string text = tessel::explainCompileLog(
      kSource, "k1.cpp", "k1.cpp:5:13: error: 'undefined_name' was not declared\n");
  EXPECT_NE(text.find("generated line 5:   out[0] = undefined_name;"), std::string::npos) << text;
  EXPECT_NE(text.find("in the kernel of tessel.add at loc(\"model.h\":3:4)"), std::string::npos)
      << text;
  EXPECT_EQ(tessel::explainCompileLog(kSource, "k1.cpp", "k1.cpp:5:1: warning: w\n"), "");
}

TEST(HostCompiler, RealCompilerFailureCarriesTheExplanation) {
  tessel::HostCompileOptions o;
  o.cacheDir = (std::filesystem::path(testing::TempDir()) / "tessel-hostcc-test").string();
  try {
    tessel::buildKernelLibrary(kSource, o);
    FAIL() << "a broken source compiled";
  } catch (const tessel::HostCompileError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("undefined_name"), std::string::npos) << what;
    EXPECT_NE(what.find("in the kernel of tessel.add at loc(\"model.h\":3:4)"), std::string::npos)
        << what;
  }
}

}  // namespace
