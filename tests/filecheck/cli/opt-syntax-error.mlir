// A syntax error gives the file, line and column, and no traceback.
// RUN: not inferx opt %s 2>&1 | filecheck %s
// CHECK: opt-syntax-error.mlir:8:62: error: unknown element type 'f33'
// CHECK-NOT: Traceback

func.func @f(%x: !ix.tensor<[4], f32>) -> !ix.tensor<[4], f32> {
  %y = ix.neg %x : (!ix.tensor<[4], f32>) -> !ix.tensor<[4], f32>
  %z = ix.neg %y : (!ix.tensor<[4], f32>) -> !ix.tensor<[4], f33>
  func.return %z : !ix.tensor<[4], f32>
}
