// ix.matmul: a[..., M, K] @ b[..., K, N] with the leading dims broadcast.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @matmuls(
// CHECK-SAME: %q: !ix.tensor<[batch, 4, seq, 16], f32>, %kt: !ix.tensor<[batch, 4, 16, ctx], f32>, %a: !ix.tensor<[seq, 64], f32>, %b: !ix.tensor<[64, 8], f32>, %bb: !ix.tensor<[batch, 1, 64, 8], f32>) {
// CHECK-NEXT: %0 = ix.matmul %q, %kt : (!ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, 16, ctx], f32>) -> !ix.tensor<[batch, 4, seq, ctx], f32>
// CHECK-NEXT: %1 = ix.matmul %a, %b : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[64, 8], f32>) -> !ix.tensor<[seq, 8], f32>
// CHECK-NEXT: %2 = ix.matmul %a, %bb : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[batch, 1, 64, 8], f32>) -> !ix.tensor<[batch, 1, seq, 8], f32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @matmuls(%q: !ix.tensor<[batch, 4, seq, 16], f32>, %kt: !ix.tensor<[batch, 4, 16, ctx], f32>, %a: !ix.tensor<[seq, 64], f32>, %b: !ix.tensor<[64, 8], f32>, %bb: !ix.tensor<[batch, 1, 64, 8], f32>) {
  %0 = ix.matmul %q, %kt : (!ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, 16, ctx], f32>) -> !ix.tensor<[batch, 4, seq, ctx], f32>
  %1 = ix.matmul %a, %b : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[64, 8], f32>) -> !ix.tensor<[seq, 8], f32>
  %2 = ix.matmul %a, %bb : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[batch, 1, 64, 8], f32>) -> !ix.tensor<[batch, 1, seq, 8], f32>
  func.return
}

// CHECK-LABEL: func.func @symbolic_k(
// CHECK-SAME: %a: !ix.tensor<[2, seq, ctx + 1], bf16>, %b: !ix.tensor<[1, ctx + 1, seq], bf16>) -> !ix.tensor<[2, seq, seq], bf16> {
// CHECK-NEXT: %0 = ix.matmul %a, %b : (!ix.tensor<[2, seq, ctx + 1], bf16>, !ix.tensor<[1, ctx + 1, seq], bf16>) -> !ix.tensor<[2, seq, seq], bf16>
// CHECK-NEXT: func.return %0 : !ix.tensor<[2, seq, seq], bf16>
// CHECK-NEXT: }
func.func @symbolic_k(%a: !ix.tensor<[2, seq, ctx + 1], bf16>, %b: !ix.tensor<[1, ctx + 1, seq], bf16>) -> !ix.tensor<[2, seq, seq], bf16> {
  %0 = ix.matmul %a, %b : (!ix.tensor<[2, seq, ctx + 1], bf16>, !ix.tensor<[1, ctx + 1, seq], bf16>) -> !ix.tensor<[2, seq, seq], bf16>
  func.return %0 : !ix.tensor<[2, seq, seq], bf16>
}
