//===- TesselInterfaces.td - interfaces of tessel ops -------------*- tablegen -*-===//
#ifndef TESSEL_INTERFACES_TD
#define TESSEL_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Tessel_VJPOpInterface : OpInterface<"VJPOpInterface"> {
  let cppNamespace = "::tessel";
  let description = [{
    The reverse-mode derivative rule of an op: given the gradients of its results (the
    cotangents), build ops that compute the gradients of its operands, i.e. the
    vector-Jacobian product. The `tessel-autodiff` pass calls it on every op between the
    parameters and the loss, last op first; an op on that path without this interface is a
    diagnostic, never a silent zero.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the VJP at the builder's insertion point. `resultGrads` has one entry per
        result, null where no gradient reaches that result. On success `operandGrads`
        holds one entry per operand: the gradient (same type as the operand), or null for
        operands that are not differentiable (integer indices and targets). Fails, with a
        diagnostic at the op, when a case is not supported.
      }],
      "::mlir::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder&":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value>&":$operandGrads)>
  ];
}

#endif // TESSEL_INTERFACES_TD
