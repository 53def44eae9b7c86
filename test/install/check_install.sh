#!/usr/bin/env bash
# The out-of-tree build (README "Your own model"): installs this build into a temporary prefix,
# copies examples/template out of the tree, configures it with only CMAKE_PREFIX_PATH (plus the
# main build's generator, build program, compilers and compiler launcher, so that it is as fast
# as the main build), builds it, and trains it for 3 steps with --plan dp=2 under
# `mpirun -np 2`. Also: the trainer lists the standard flags, every installed binary starts,
# every installed header's project includes resolve inside the prefix, nothing installed or
# built names the source or build tree, --emit-bundle of the user's model does not suggest
# tessel-run (which feeds only Tessel's own models' data), a project pointed at a prefix
# without Tessel fails at configure time naming the package and CMAKE_PREFIX_PATH,
# tessel_add_trainer without sources fails naming the call, and a project that enables no
# language configures.
#
# Usage: check_install.sh CMAKE SOURCE_DIR BUILD_DIR GENERATOR MAKE_PROGRAM C_COMPILER CXX_COMPILER LAUNCHER MPIEXEC DATA
# (LAUNCHER may be "": no compiler launcher).
set -euo pipefail
if [ $# -ne 10 ]; then
  echo "usage: $0 CMAKE SOURCE_DIR BUILD_DIR GENERATOR MAKE_PROGRAM C_COMPILER CXX_COMPILER LAUNCHER MPIEXEC DATA" >&2
  exit 2
fi
cmake=$1 src=$2 build=$3 generator=$4 make=$5 cc=$6 cxx=$7 launcher=$8 mpiexec=$9 data=${10}

fail() { echo "FAIL: $*" >&2; exit 1; }
[ -f "$data" ] || fail "the training text $data is missing (TESSEL_SHARED_DATA)"

work=$(mktemp -d "${TMPDIR:-/tmp}/tessel-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
start=$SECONDS

# 1. Install. Everything `cmake --install` copies must be built (scripts/build.sh builds all).
"$cmake" --install "$build" --prefix "$prefix" > "$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install failed (is the whole tree built?)"; }
# Each installed binary starts (the loader finds MLIR's and OpenBLAS's libraries from it).
for tool in tessel tessel-run tessel-opt tessel-translate tessel-gpt tessel-mlp; do
  [ -x "$prefix/bin/$tool" ] || fail "$prefix/bin/$tool was not installed"
  "$prefix/bin/$tool" --help > "$work/help.log" 2>&1 ||
    { cat "$work/help.log" >&2; fail "the installed $tool --help exited non-zero"; }
done
for f in lib/cmake/Tessel/TesselConfig.cmake lib/cmake/Tessel/TesselConfigVersion.cmake \
         lib/cmake/Tessel/TesselTargets.cmake include/tessel/dsl/tessel.h include/tessel/dsl/trainer/App.h; do
  [ -f "$prefix/$f" ] || fail "$prefix/$f was not installed"
done

# 2. Every project header an installed header includes is installed too.
include=$prefix/include/tessel
missing=$(cd "$include" && grep -rHo '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' --include='*.h' . |
  sed -E 's/^\.\/([^:]*):.*"([^"]*)"$/\1 \2/' |
  while read -r header inc; do
    case "$inc" in
      dsl/*|runtime/*|compiler/*|passes/*|codegen/*|examples/*) [ -f "$inc" ] || echo "$header includes $inc";;
    esac
  done)
[ -z "$missing" ] || fail "installed headers include headers that are not installed:
$missing"

# 3. Copy the template out of the tree and build it against the prefix alone.
cp -r "$src/examples/template" "$work/project"
rm -rf "$work/project/build"  # a build folder someone made in the tree is not the template
args=(-G "$generator" -DCMAKE_MAKE_PROGRAM="$make" -DCMAKE_C_COMPILER="$cc"
      -DCMAKE_CXX_COMPILER="$cxx")
[ -z "$launcher" ] || args+=(-DCMAKE_C_COMPILER_LAUNCHER="$launcher" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
"$cmake" "${args[@]}" -S "$work/project" -B "$work/project/build" -DCMAKE_PREFIX_PATH="$prefix" > "$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; fail "configuring the template against $prefix failed"; }
"$cmake" --build "$work/project/build" > "$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; fail "building the template failed"; }
trainer=$work/project/build/tiny-transformer
[ -x "$trainer" ] || fail "the template built no tiny-transformer"
echo "installed, configured and built in $((SECONDS - start)) s"
# It has the trainer's flag set: plans, devices, bundles, precision, logging, explain.
"$trainer" --help > "$work/help.log" 2>&1 || { cat "$work/help.log" >&2; fail "tiny-transformer --help failed"; }
for flag in --plan --device --emit-bundle --precision --log-json --explain --checkpoint-dir; do
  grep -qe "$flag" "$work/help.log" || fail "tiny-transformer --help lists no $flag"
done

# 4. Nothing installed or built refers to the source or the build tree.
for tree in "$src" "$build"; do
  refs=$(grep -rl --binary-files=text -F "$tree" "$prefix" "$trainer" || true)
  [ -z "$refs" ] || fail "these files name $tree: $refs"
done

# 5. Train 3 steps on 2 ranks.
out=$work/train.log
"$mpiexec" --oversubscribe -np 2 "$trainer" --data "$data" --steps 3 --plan dp=2 --device cpu > "$out" 2>&1 ||
  { cat "$out" >&2; fail "mpirun -np 2 tiny-transformer --plan dp=2 exited non-zero"; }
cat "$out"
steps=$(grep -cE '^step +[1-3]/3 \| loss [0-9]' "$out" || true)
[ "$steps" -eq 3 ] || fail "expected 3 step lines with a loss, found $steps"
! grep -qiwE 'error|nan' "$out" || fail "the training output reports an error or a NaN"
grep -q '^communication: 1.0 all-reduces/step' "$out" || fail "dp=2 did not all-reduce once per step"

# 5b. --emit-bundle of a model tessel-run does not feed says so instead of suggesting tessel-run.
"$trainer" --data "$data" --emit-bundle "$work/bundle" --device cpu > "$work/bundle.log" 2>&1 ||
  { cat "$work/bundle.log" >&2; fail "tiny-transformer --emit-bundle exited non-zero"; }
grep -q "tessel-run feeds only the data of gpt, llama, mlp and lab bundles, not of model 'tiny-transformer'" \
  "$work/bundle.log" || { cat "$work/bundle.log" >&2; fail "--emit-bundle of a user model suggested tessel-run"; }

# 6. A prefix without Tessel fails at configure time, naming the package and CMAKE_PREFIX_PATH.
# The system paths are off, so that a Tessel installed system-wide cannot hide the failure.
if "$cmake" "${args[@]}" -S "$work/project" -B "$work/project/missing" -DCMAKE_PREFIX_PATH="$work/no-such-prefix" \
     -DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF -DCMAKE_FIND_USE_SYSTEM_ENVIRONMENT_PATH=OFF \
     > "$work/missing.log" 2>&1; then
  fail "configuring against a prefix without Tessel succeeded"
fi
grep -q 'TesselConfig.cmake' "$work/missing.log" && grep -q 'CMAKE_PREFIX_PATH' "$work/missing.log" ||
  { cat "$work/missing.log" >&2; fail "the missing-prefix error names neither TesselConfig.cmake nor CMAKE_PREFIX_PATH"; }
# 7. tessel_add_trainer without a source fails at configure time, naming the call.
mkdir "$work/nosources"
printf 'cmake_minimum_required(VERSION 3.20)\nproject(nosources CXX)\nfind_package(Tessel CONFIG REQUIRED)\ntessel_add_trainer(empty)\n' \
  > "$work/nosources/CMakeLists.txt"
if "$cmake" "${args[@]}" -S "$work/nosources" -B "$work/nosources/build" -DCMAKE_PREFIX_PATH="$prefix" \
     > "$work/nosources.log" 2>&1; then
  fail "tessel_add_trainer(empty) without sources configured"
fi
grep -q 'tessel_add_trainer(empty) names no source file' "$work/nosources.log" ||
  { cat "$work/nosources.log" >&2; fail "tessel_add_trainer without sources did not say so"; }
# 8. A project that enables no language (project(p LANGUAGES NONE)) still configures: the
# package enables CXX and C itself (OpenMP::OpenMP_CXX and the link language need CXX).
mkdir "$work/nolanguages"
cp "$work/project/"*.cpp "$work/project/"*.h "$work/nolanguages/"
printf 'cmake_minimum_required(VERSION 3.20)\nproject(nolanguages LANGUAGES NONE)\nfind_package(Tessel CONFIG REQUIRED)\ntessel_add_trainer(t %s)\n' \
  "$(cd "$work/nolanguages" && ls *.cpp | tr '\n' ' ')" > "$work/nolanguages/CMakeLists.txt"
"$cmake" "${args[@]}" -S "$work/nolanguages" -B "$work/nolanguages/build" -DCMAKE_PREFIX_PATH="$prefix" \
  > "$work/nolanguages.log" 2>&1 ||
  { cat "$work/nolanguages.log" >&2; fail "a project(... LANGUAGES NONE) did not configure against $prefix"; }
echo "PASS in $((SECONDS - start)) s"
