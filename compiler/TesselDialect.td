//===- TesselDialect.td - the tessel dialect -----------------------*- tablegen -*-===//
//
// The tessel dialect holds the neural-network ops of a training program on global
// (unsharded) shapes. Tensors are builtin ranked tensors of f32, bf16 and i32 with static
// shapes. Meshes, shardings and collectives come from the upstream `shard` dialect.
//
//===------------------------------------------------------------------------------===//
#ifndef TESSEL_DIALECT_TD
#define TESSEL_DIALECT_TD

include "mlir/IR/OpBase.td"

def Tessel_Dialect : Dialect {
  let name = "tessel";
  let cppNamespace = "::tessel";
  let summary = "Neural-network ops of a Tessel training program.";
  let description = [{
    The `tessel` dialect describes *what* a model computes: parameters (`tessel.param`),
    matrix products, elementwise ops, normalisation, softmax, attention and the loss,
    on global shapes. Every op carries the user's source line (a `FileLineColLoc`
    wrapped in a `NameLoc` holding the parameter path) so that errors found in any pass
    point at the model source.

    Broadcasting: binary elementwise ops (`add`, `sub`, `mul`) accept equal shapes, or a
    shorter operand whose shape equals the trailing dimensions of the longer one (numpy
    broadcasting restricted to missing leading dimensions, e.g. a bias `[C]` added to
    `[B, T, C]`). No other op broadcasts. Reductions remove the reduced dimensions.
  }];
  let useDefaultAttributePrinterParser = 0;
  let useDefaultTypePrinterParser = 0;
}

// Element types and tensor classes used by the ops.
def Tessel_FloatTensor : StaticShapeTensorOf<[F32, BF16]>;
def Tessel_IndexTensor : StaticShapeTensorOf<[I32]>;
def Tessel_AnyTensor : StaticShapeTensorOf<[F32, BF16, I32]>;
// An f32 scalar (tensor<f32>): losses, norms and runtime hyper-parameters. Buildable, so
// assembly formats need not spell its type.
def Tessel_ScalarF32 : 0DTensorOf<[F32]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getF32Type())";
}

class Tessel_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tessel_Dialect, mnemonic, traits>;

#endif // TESSEL_DIALECT_TD
