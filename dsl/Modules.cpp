// Module, Linear, LayerNorm, RMSNorm and Embedding.
#include "dsl/Graph.h"

#include <fmt/format.h>

namespace tessel {

Module::Module(Model* root) : root_(root) {}

Module::Module(Module* parent, std::string name)
    : root_(parent ? parent->root_ : nullptr),
      path_(parent ? parent->qualify(name) : std::move(name)) {
  if (!parent) throw std::invalid_argument("tessel::Module needs a parent module");
  root_->graph().declareModule(path_);
}

std::string Module::qualify(const std::string& local) const {
  return path_.empty() ? local : path_ + "." + local;
}

Module::Scope::Scope(const Module& m) : graph_(&m.root_->graph()) { graph_->pushScope(m.path_); }
Module::Scope::~Scope() { graph_->popScope(); }

void Module::declare_parameter(const std::string& local, Shape shape, Init init, double stddev,
                               Loc loc) {
  Graph& g = root_->graph();
  g.declareParameter(ParameterSpec{qualify(local), std::move(shape), init, stddev},
                     g.location(loc, path_));
}

void Module::check_argument(const std::string& error, const std::string& opName, Loc loc) const {
  Graph& g = root_->graph();
  g.check(error, opName, g.location(loc, path_));
}

Tensor Module::parameter(const std::string& local, Loc loc) const {
  Graph& g = root_->graph();
  return g.parameter(qualify(local), g.location(loc, path_));
}

Linear::Linear(Module* parent, std::string name, int64_t in, int64_t out, LinearOptions options,
               Loc loc)
    : Module(parent, std::move(name)), in_(in), out_(out), bias_(options.bias) {
  declare_parameter("weight", {out, in}, Init::Normal, options.std, loc);
  if (bias_) declare_parameter("bias", {out}, Init::Zeros, 0.0, loc);
}

Tensor Linear::operator()(const Tensor& x, Loc loc) const {
  Graph::of(x, loc);  // an empty tensor is an error at the caller\'s line
  Scope scope(*this);
  Tensor y = matmul(x, parameter("weight", loc), {.transpose_rhs = true}, loc);
  if (bias_) y = At(y, loc) + parameter("bias", loc);
  return y;
}

LayerNorm::LayerNorm(Module* parent, std::string name, int64_t channels, double eps, Loc loc)
    : Module(parent, std::move(name)), eps_(eps) {
  // At the declaration's line, not at each call's.
  check_argument(shapes::normEpsilonError(eps), LayerNormOp::getOperationName().str(), loc);
  declare_parameter("weight", {channels}, Init::Ones, 0.0, loc);
  declare_parameter("bias", {channels}, Init::Zeros, 0.0, loc);
}

Tensor LayerNorm::operator()(const Tensor& x, Loc loc) const {
  Graph::of(x, loc);  // an empty tensor is an error at the caller\'s line
  Scope scope(*this);
  return layer_norm(x, parameter("weight", loc), parameter("bias", loc), eps_, loc);
}

RMSNorm::RMSNorm(Module* parent, std::string name, int64_t channels, double eps, Loc loc)
    : Module(parent, std::move(name)), eps_(eps) {
  check_argument(shapes::normEpsilonError(eps), RmsNormOp::getOperationName().str(), loc);
  declare_parameter("weight", {channels}, Init::Ones, 0.0, loc);
}

Tensor RMSNorm::operator()(const Tensor& x, Loc loc) const {
  Graph::of(x, loc);  // an empty tensor is an error at the caller\'s line
  Scope scope(*this);
  return rms_norm(x, parameter("weight", loc), eps_, loc);
}

Embedding::Embedding(Module* parent, std::string name, int64_t vocab, int64_t channels, Loc loc)
    : Module(parent, std::move(name)) {
  declare_parameter("weight", {vocab, channels}, Init::Normal, 0.02, loc);
}

Tensor Embedding::operator()(const Tensor& indices, Loc loc) const {
  Graph::of(indices, loc);  // an empty tensor is an error at the caller\'s line
  Scope scope(*this);
  return embedding(parameter("weight", loc), indices, loc);
}

Tensor Embedding::weight(Loc loc) const { return parameter("weight", loc); }

}  // namespace tessel
