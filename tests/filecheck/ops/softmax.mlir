// ix.softmax along dim (negative counts from the end); the result has the input's type.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @softmaxes(
// CHECK-SAME: %s: !ix.tensor<[batch, 4, seq, ctx + seq], f32>, %h: !ix.tensor<[seq, 8], bf16>) {
// CHECK-NEXT: %0 = ix.softmax %s {dim = -1 : i64} : (!ix.tensor<[batch, 4, seq, ctx + seq], f32>) -> !ix.tensor<[batch, 4, seq, ctx + seq], f32>
// CHECK-NEXT: %1 = ix.softmax %s {dim = 3 : i64} : (!ix.tensor<[batch, 4, seq, ctx + seq], f32>) -> !ix.tensor<[batch, 4, seq, ctx + seq], f32>
// CHECK-NEXT: %2 = ix.softmax %h {dim = 0 : i64} : (!ix.tensor<[seq, 8], bf16>) -> !ix.tensor<[seq, 8], bf16>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @softmaxes(%s: !ix.tensor<[batch, 4, seq, ctx + seq], f32>, %h: !ix.tensor<[seq, 8], bf16>) {
  %0 = ix.softmax %s {dim = -1 : i64} : (!ix.tensor<[batch, 4, seq, ctx + seq], f32>) -> !ix.tensor<[batch, 4, seq, ctx + seq], f32>
  %1 = ix.softmax %s {dim = 3 : i64} : (!ix.tensor<[batch, 4, seq, ctx + seq], f32>) -> !ix.tensor<[batch, 4, seq, ctx + seq], f32>
  %2 = ix.softmax %h {dim = 0 : i64} : (!ix.tensor<[seq, 8], bf16>) -> !ix.tensor<[seq, 8], bf16>
  func.return
}
