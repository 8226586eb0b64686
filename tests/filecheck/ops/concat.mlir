// ix.concat: joins inputs along dim (negative counts from the end); sizes add up symbolically.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @concats(
// CHECK-SAME: %k: !ix.tensor<[batch, 4, ctx, 16], bf16>, %new: !ix.tensor<[batch, 4, seq, 16], bf16>, %a: !ix.tensor<[batch, 32], bf16>, %b: !ix.tensor<[batch, 32], bf16>) {
// CHECK-NEXT: %0 = ix.concat %k, %new {dim = 2 : i64} : (!ix.tensor<[batch, 4, ctx, 16], bf16>, !ix.tensor<[batch, 4, seq, 16], bf16>) -> !ix.tensor<[batch, 4, ctx + seq, 16], bf16>
// CHECK-NEXT: %1 = ix.concat %a, %b, %a {dim = -1 : i64} : (!ix.tensor<[batch, 32], bf16>, !ix.tensor<[batch, 32], bf16>, !ix.tensor<[batch, 32], bf16>) -> !ix.tensor<[batch, 96], bf16>
// CHECK-NEXT: %2 = ix.concat %a, %a {dim = 0 : i64} : (!ix.tensor<[batch, 32], bf16>, !ix.tensor<[batch, 32], bf16>) -> !ix.tensor<[2 * batch, 32], bf16>
// CHECK-NEXT: %3 = ix.concat %a {dim = 1 : i64} : (!ix.tensor<[batch, 32], bf16>) -> !ix.tensor<[batch, 32], bf16>
// CHECK-NEXT: %4 = ix.concat %new, %new {dim = 2 : i64} : (!ix.tensor<[batch, 4, seq, 16], bf16>, !ix.tensor<[batch, 4, seq, 16], bf16>) -> !ix.tensor<[batch, 4, 2 * seq, 16], bf16>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @concats(%k: !ix.tensor<[batch, 4, ctx, 16], bf16>, %new: !ix.tensor<[batch, 4, seq, 16], bf16>, %a: !ix.tensor<[batch, 32], bf16>, %b: !ix.tensor<[batch, 32], bf16>) {
  %0 = ix.concat %k, %new {dim = 2 : i64} : (!ix.tensor<[batch, 4, ctx, 16], bf16>, !ix.tensor<[batch, 4, seq, 16], bf16>) -> !ix.tensor<[batch, 4, ctx + seq, 16], bf16>
  %1 = ix.concat %a, %b, %a {dim = -1 : i64} : (!ix.tensor<[batch, 32], bf16>, !ix.tensor<[batch, 32], bf16>, !ix.tensor<[batch, 32], bf16>) -> !ix.tensor<[batch, 96], bf16>
  %2 = ix.concat %a, %a {dim = 0 : i64} : (!ix.tensor<[batch, 32], bf16>, !ix.tensor<[batch, 32], bf16>) -> !ix.tensor<[2 * batch, 32], bf16>
  %3 = ix.concat %a {dim = 1 : i64} : (!ix.tensor<[batch, 32], bf16>) -> !ix.tensor<[batch, 32], bf16>
  %4 = ix.concat %new, %new {dim = 2 : i64} : (!ix.tensor<[batch, 4, seq, 16], bf16>, !ix.tensor<[batch, 4, seq, 16], bf16>) -> !ix.tensor<[batch, 4, seq + seq, 16], bf16>
  func.return
}
