// Included first by the stand-in driver's host builds of CUDA modules (Modules.cpp): the SIMT
// harness, and how a launch reaches a kernel. Each kernel `k` of the module gets
//   extern "C" void k__standin(const tessel_standin::Launch*)      (runs one launch)
//   extern "C" const tessel_standin::Params k__standin_params      (its parameters' sizes)
// so the driver learns each kernel's parameter count and sizes from the kernel's own C++
// signature, and passes device pointers that are translated to host views when it runs.
#pragma once

#include "test/simt/Simt.h"

#include <cstddef>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

namespace tessel_standin {

/// A kernel's parameters: how many, and each one's size in bytes.
struct Params {
  int count = 0;
  unsigned sizes[128] = {};
};

/// One launch: grid and block, the argument values (args[i] points at parameter i's bytes, as
/// cuLaunchKernel's kernelParams), and the translation of a device address (a pointer
/// parameter) to the host view the kernel uses; it throws for an address not in a live
/// allocation, naming the argument.
struct Launch {
  unsigned grid[3], block[3];
  void* const* args;
  void* (*translate)(void* context, unsigned long long address, int index);
  void* context;
};

template <typename... P>
constexpr Params params(void (*)(P...)) {
  static_assert(sizeof...(P) <= 128, "a kernel with more than 128 parameters");
  return Params{static_cast<int>(sizeof...(P)), {static_cast<unsigned>(sizeof(P))...}};
}

template <typename T>
T argument(const Launch& l, int i) {
  if constexpr (std::is_pointer_v<T>) {
    unsigned long long address;
    std::memcpy(&address, l.args[i], sizeof address);
    return static_cast<T>(l.translate(l.context, address, i));
  } else {
    T value;
    std::memcpy(&value, l.args[i], sizeof value);
    return value;
  }
}

template <typename... P, std::size_t... I>
void runWith(void (*kernel)(P...), const Launch& l, std::index_sequence<I...>) {
  std::tuple<P...> args{argument<P>(l, static_cast<int>(I))...};  // every pointer checked first
  simt::launch(dim3(l.grid[0], l.grid[1], l.grid[2]), dim3(l.block[0], l.block[1], l.block[2]),
               [&] { std::apply(kernel, args); });
}

template <typename... P>
void run(void (*kernel)(P...), const Launch* l) {
  runWith(kernel, *l, std::index_sequence_for<P...>{});
}

}  // namespace tessel_standin
