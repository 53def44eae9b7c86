// Sampling from a byte-level language model; see Sampling.h.
#include "dsl/trainer/Sampling.h"

#include "dsl/trainer/Flags.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tessel::trainer {

void addSampleFlags(CLI::App& app, SampleOptions& o) {
  app.add_option("--sample-bytes", o.bytes, "bytes to sample after training (0: none)")
      ->capture_default_str()->check(integerIn(0, int64_t{1} << 20));
  app.add_option("--temperature", o.temperature, "sampling temperature")
      ->capture_default_str()->check(numberIn(1e-3, 100.0));
  app.add_option("--top-k", o.topK, "sample among the k most likely bytes (0: all)")
      ->capture_default_str()->check(integerIn(0, 256));
}

std::string sampleBytes(NativeProgram& sampler, std::vector<int32_t> window,
                        const SampleOptions& o, std::mt19937_64& rng) {
  rt::Executor& ex = sampler.executor();
  const int64_t seq = static_cast<int64_t>(window.size());
  std::string out;
  std::vector<double> p;
  for (int64_t n = 0; n < o.bytes; ++n) {
    ex.setInput("forward", 0, window.data(), window.size() * sizeof(int32_t));
    ex.run("forward");
    rt::OutputView logits = ex.outputs("forward").at(0);
    // Rows past 256 (a vocabulary padded with --vocab) are never bytes: not candidates.
    const int64_t stride = logits.shape.back(), vocab = std::min<int64_t>(stride, 256);
    const float* last = static_cast<const float*>(logits.data) + (seq - 1) * stride;
    std::vector<int> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    int64_t k = o.topK > 0 ? std::min(o.topK, vocab) : vocab;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return last[a] > last[b]; });
    p.assign(k, 0.0);
    double top = last[order[0]], sum = 0;
    for (int64_t i = 0; i < k; ++i) sum += p[i] = std::exp((last[order[i]] - top) / o.temperature);
    // Inverse-CDF draw from 53 random bits (portable, unlike std::discrete_distribution).
    double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * sum;
    int64_t pick = 0;
    for (double acc = p[0]; acc < u && pick + 1 < k;) acc += p[++pick];
    int32_t byte = order[pick];
    out.push_back(static_cast<char>(byte));
    window.erase(window.begin());
    window.push_back(byte);
  }
  return out;
}

}  // namespace tessel::trainer
