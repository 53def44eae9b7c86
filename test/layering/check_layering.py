#!/usr/bin/env python3
"""Checks that runtime/ needs no compiler piece (docs/architecture.md, DESIGN.md "no MLIR").

Two rules, each violation printed as one line "<file>:<line>: <what>":
  1. No file under runtime/ includes a header of compiler/, passes/, codegen/ or dsl/, or
     any mlir/, mlir-c/, llvm/ or llvm-c/ header.
  2. No CMake target defined under runtime/ links, directly or through other targets of the
     project, a target defined under compiler/, passes/, codegen/ or dsl/, or MLIR/LLVM
     (names starting with MLIR, LLVM or tessel_mlir). The link graph is read from every
     CMakeLists.txt of the tree (add_library/add_executable and target_link_libraries).

Usage: check_layering.py SOURCE_ROOT      exit 0 if clean, 1 listing every violation
       check_layering.py --self-test DIR  runs the check on the fixture tree DIR, which has
                                          known violations, and fails unless it finds exactly
                                          those (so the check itself is shown able to fail).
"""
import os
import re
import sys

COMPILER_SIDE = ("compiler", "passes", "codegen", "dsl")
FORBIDDEN_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]((?:compiler|passes|codegen|dsl|mlir|mlir-c|llvm|llvm-c)/[^">]*)[">]')
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".inc", ".def")
FORBIDDEN_LINK = re.compile(r"^(MLIR|LLVM|tessel_mlir)")


def include_violations(root):
    out = []
    for folder, _, files in os.walk(os.path.join(root, "runtime")):
        for name in sorted(files):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = FORBIDDEN_INCLUDE.match(line)
                    if m:
                        out.append(f"{os.path.relpath(path, root)}:{number}: includes '{m.group(1)}'")
    return out


def cmake_commands(text, command):
    """(line, [arguments]) of every call of `command` in a CMakeLists text."""
    text = re.sub(r"#[^\n]*", "", text)
    for m in re.finditer(r"\b" + command + r"\s*\(([^)]*)\)", text):
        yield text.count("\n", 0, m.start()) + 1, m.group(1).split()


def link_graph(root):
    """targets: name -> (top folder, CMakeLists path, line); links: name -> [(dep, path, line)]."""
    targets, links = {}, {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("build", "fixture")]
        if "CMakeLists.txt" not in files:
            continue
        path = os.path.join(folder, "CMakeLists.txt")
        rel = os.path.relpath(path, root)
        top = rel.split(os.sep)[0] if os.sep in rel else ""
        text = open(path, encoding="utf-8").read()
        for command in ("add_library", "add_executable"):
            for line, args in cmake_commands(text, command):
                if args and not args[0].startswith("${"):
                    targets[args[0]] = (top, rel, line)
        for line, args in cmake_commands(text, "target_link_libraries"):
            deps = [a for a in args[1:] if a not in ("PUBLIC", "PRIVATE", "INTERFACE") and not a.startswith("${")
                    and not a.startswith("$<")]
            links.setdefault(args[0], []).extend((d, rel, line) for d in deps)
    return targets, links


def link_violations(root):
    targets, links = link_graph(root)
    out = []
    for name, (top, rel, line) in sorted(targets.items()):
        if top != "runtime":
            continue
        # Breadth-first over project targets; the first path to a forbidden one is reported.
        seen, queue = {name}, [(name, [name])]
        while queue:
            current, chain = queue.pop(0)
            for dep, _, _ in links.get(current, []):
                if dep in seen:
                    continue
                seen.add(dep)
                forbidden = FORBIDDEN_LINK.match(dep) or targets.get(dep, ("",))[0] in COMPILER_SIDE
                if forbidden:
                    out.append(f"{rel}:{line}: target '{name}' links '{dep}' ({' -> '.join(chain + [dep])})")
                elif dep in targets:
                    queue.append((dep, chain + [dep]))
    return out


def check(root):
    return include_violations(root) + link_violations(root)


# What the fixture tree (test/layering/fixture) must yield: one of each kind of violation.
SELF_TEST_EXPECTED = [
    "runtime/exec/Bad.cpp:3: includes 'codegen/HostCompiler.h'",
    "runtime/exec/Bad.cpp:4: includes 'mlir/IR/Builders.h'",
    "runtime/exec/Bad.cpp:5: includes 'llvm/ADT/DenseMap.h'",
    "runtime/exec/Bad.h:2: includes 'dsl/tessel.h'",
    "runtime/CMakeLists.txt:3: target 'fixture_bundle' links 'fixture_hostcc' (fixture_bundle -> fixture_exec -> fixture_hostcc)",
    "runtime/CMakeLists.txt:2: target 'fixture_exec' links 'fixture_hostcc' (fixture_exec -> fixture_hostcc)",
    "runtime/CMakeLists.txt:4: target 'fixture_loop' links 'MLIR' (fixture_loop -> MLIR)",
]


def main(argv):
    if len(argv) == 3 and argv[1] == "--self-test":
        got = check(argv[2])
        if sorted(got) != sorted(SELF_TEST_EXPECTED):
            print("layering self-test FAILED: expected\n  " + "\n  ".join(SELF_TEST_EXPECTED) +
                  "\ngot\n  " + "\n  ".join(got))
            return 1
        print(f"layering self-test: all {len(got)} planted violations found, nothing else")
        return 0
    if len(argv) != 2:
        print(__doc__)
        return 2
    found = check(argv[1])
    for line in found:
        print(line)
    if found:
        print(f"runtime/ layering: {len(found)} violation(s): the runtime must not need the compiler side "
              "(compiler/, passes/, codegen/, dsl/, MLIR, LLVM)")
        return 1
    print("runtime/ layering: clean")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
