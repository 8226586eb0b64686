// The unary elementwise ops (neg, exp, rsqrt, sqrt, silu, sigmoid, tanh, gelu): the result has the
// input's type; gelu's approximate attribute prints only when stated.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @float_ops(
// CHECK-SAME: %x: !ix.tensor<[batch, seq + 1, 64], f16>) {
// CHECK-NEXT: %0 = ix.neg %x : (!ix.tensor<[batch, seq + 1, 64], f16>) -> !ix.tensor<[batch, seq + 1, 64], f16>
// CHECK-NEXT: %1 = ix.exp %x : (!ix.tensor<[batch, seq + 1, 64], f16>) -> !ix.tensor<[batch, seq + 1, 64], f16>
// CHECK-NEXT: %2 = ix.rsqrt %x : (!ix.tensor<[batch, seq + 1, 64], f16>) -> !ix.tensor<[batch, seq + 1, 64], f16>
// CHECK-NEXT: %3 = ix.sqrt %x : (!ix.tensor<[batch, seq + 1, 64], f16>) -> !ix.tensor<[batch, seq + 1, 64], f16>
// CHECK-NEXT: %4 = ix.silu %x : (!ix.tensor<[batch, seq + 1, 64], f16>) -> !ix.tensor<[batch, seq + 1, 64], f16>
// CHECK-NEXT: %5 = ix.sigmoid %x : (!ix.tensor<[batch, seq + 1, 64], f16>) -> !ix.tensor<[batch, seq + 1, 64], f16>
// CHECK-NEXT: %6 = ix.tanh %x : (!ix.tensor<[batch, seq + 1, 64], f16>) -> !ix.tensor<[batch, seq + 1, 64], f16>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @float_ops(%x: !ix.tensor<[batch, seq + 1, 64], f16>) {
  %0 = ix.neg %x : (!ix.tensor<[batch, seq + 1, 64], f16>) -> !ix.tensor<[batch, seq + 1, 64], f16>
  %1 = ix.exp %x : (!ix.tensor<[batch, seq + 1, 64], f16>) -> !ix.tensor<[batch, seq + 1, 64], f16>
  %2 = ix.rsqrt %x : (!ix.tensor<[batch, seq + 1, 64], f16>) -> !ix.tensor<[batch, seq + 1, 64], f16>
  %3 = ix.sqrt %x : (!ix.tensor<[batch, seq + 1, 64], f16>) -> !ix.tensor<[batch, seq + 1, 64], f16>
  %4 = ix.silu %x : (!ix.tensor<[batch, seq + 1, 64], f16>) -> !ix.tensor<[batch, seq + 1, 64], f16>
  %5 = ix.sigmoid %x : (!ix.tensor<[batch, seq + 1, 64], f16>) -> !ix.tensor<[batch, seq + 1, 64], f16>
  %6 = ix.tanh %x : (!ix.tensor<[batch, seq + 1, 64], f16>) -> !ix.tensor<[batch, seq + 1, 64], f16>
  func.return
}

// CHECK-LABEL: func.func @gelu(
// CHECK-SAME: %x: !ix.tensor<[batch * seq, 3072], bf16>) -> !ix.tensor<[batch * seq, 3072], bf16> {
// CHECK-NEXT: %0 = ix.gelu %x : (!ix.tensor<[batch * seq, 3072], bf16>) -> !ix.tensor<[batch * seq, 3072], bf16>
// CHECK-NEXT: %1 = ix.gelu %0 {approximate = "none"} : (!ix.tensor<[batch * seq, 3072], bf16>) -> !ix.tensor<[batch * seq, 3072], bf16>
// CHECK-NEXT: %2 = ix.gelu %1 {approximate = "tanh"} : (!ix.tensor<[batch * seq, 3072], bf16>) -> !ix.tensor<[batch * seq, 3072], bf16>
// CHECK-NEXT: func.return %2 : !ix.tensor<[batch * seq, 3072], bf16>
// CHECK-NEXT: }
func.func @gelu(%x: !ix.tensor<[batch * seq, 3072], bf16>) -> !ix.tensor<[batch * seq, 3072], bf16> {
  %0 = ix.gelu %x : (!ix.tensor<[batch * seq, 3072], bf16>) -> !ix.tensor<[batch * seq, 3072], bf16>
  %1 = ix.gelu %0 {approximate = "none"} : (!ix.tensor<[batch * seq, 3072], bf16>) -> !ix.tensor<[batch * seq, 3072], bf16>
  %2 = ix.gelu %1 {approximate = "tanh"} : (!ix.tensor<[batch * seq, 3072], bf16>) -> !ix.tensor<[batch * seq, 3072], bf16>
  func.return %2 : !ix.tensor<[batch * seq, 3072], bf16>
}

// CHECK-LABEL: func.func @neg_int(
// CHECK-SAME: %x: !ix.tensor<[seq floordiv 2], i64>, %s: !ix.tensor<[], f32>) {
// CHECK-NEXT: %0 = ix.neg %x : (!ix.tensor<[seq floordiv 2], i64>) -> !ix.tensor<[seq floordiv 2], i64>
// CHECK-NEXT: %1 = ix.exp %s : (!ix.tensor<[], f32>) -> !ix.tensor<[], f32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @neg_int(%x: !ix.tensor<[seq floordiv 2], i64>, %s: !ix.tensor<[], f32>) {
  %0 = ix.neg %x : (!ix.tensor<[seq floordiv 2], i64>) -> !ix.tensor<[seq floordiv 2], i64>
  %1 = ix.exp %s : (!ix.tensor<[], f32>) -> !ix.tensor<[], f32>
  func.return
}
