// ix.split: one stated result per piece; piece sizes along dim must add up to the input's.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @splits(
// CHECK-SAME: %qkv: !ix.tensor<[batch, seq, 192], bf16>, %gu: !ix.tensor<[batch * seq, 2 * ffn], f32>, %kv: !ix.tensor<[batch, ctx + seq, 8], f32>) {
// CHECK-NEXT: %0, %1, %2 = ix.split %qkv {dim = 2 : i64} : (!ix.tensor<[batch, seq, 192], bf16>) -> (!ix.tensor<[batch, seq, 128], bf16>, !ix.tensor<[batch, seq, 32], bf16>, !ix.tensor<[batch, seq, 32], bf16>)
// CHECK-NEXT: %3, %4 = ix.split %gu {dim = -1 : i64} : (!ix.tensor<[batch * seq, 2 * ffn], f32>) -> (!ix.tensor<[batch * seq, ffn], f32>, !ix.tensor<[batch * seq, ffn], f32>)
// CHECK-NEXT: %5, %6 = ix.split %kv {dim = 1 : i64} : (!ix.tensor<[batch, ctx + seq, 8], f32>) -> (!ix.tensor<[batch, ctx, 8], f32>, !ix.tensor<[batch, seq, 8], f32>)
// CHECK-NEXT: %7 = ix.split %qkv {dim = 0 : i64} : (!ix.tensor<[batch, seq, 192], bf16>) -> !ix.tensor<[batch, seq, 192], bf16>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @splits(%qkv: !ix.tensor<[batch, seq, 192], bf16>, %gu: !ix.tensor<[batch * seq, 2 * ffn], f32>, %kv: !ix.tensor<[batch, ctx + seq, 8], f32>) {
  %0:3 = ix.split %qkv {dim = 2 : i64} : (!ix.tensor<[batch, seq, 192], bf16>) -> (!ix.tensor<[batch, seq, 128], bf16>, !ix.tensor<[batch, seq, 32], bf16>, !ix.tensor<[batch, seq, 32], bf16>)
  %1:2 = ix.split %gu {dim = -1 : i64} : (!ix.tensor<[batch * seq, 2 * ffn], f32>) -> (!ix.tensor<[batch * seq, ffn], f32>, !ix.tensor<[batch * seq, ffn], f32>)
  %2:2 = ix.split %kv {dim = 1 : i64} : (!ix.tensor<[batch, ctx + seq, 8], f32>) -> (!ix.tensor<[batch, ctx, 8], f32>, !ix.tensor<[batch, seq, 8], f32>)
  %3 = ix.split %qkv {dim = 0 : i64} : (!ix.tensor<[batch, seq, 192], bf16>) -> !ix.tensor<[batch, seq, 192], bf16>
  func.return
}
