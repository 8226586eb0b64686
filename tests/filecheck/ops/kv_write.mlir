// ix.kv_write returns the cache[batch, kv_heads, max_ctx, head_dim] with new[batch, kv_heads, seq,
// head_dim] written at positions[batch, seq].
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @writes(
// CHECK-SAME: %cache: !ix.tensor<[batch, 3, 2048, 64], bf16>, %new: !ix.tensor<[batch, 3, seq, 64], bf16>, %pos: !ix.tensor<[batch, seq], i32>, %one: !ix.tensor<[batch, 3, 1, 64], bf16>, %p1: !ix.tensor<[batch, 1], i64>) {
// CHECK-NEXT: %0 = ix.kv_write %cache, %new, %pos : (!ix.tensor<[batch, 3, 2048, 64], bf16>, !ix.tensor<[batch, 3, seq, 64], bf16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 3, 2048, 64], bf16>
// CHECK-NEXT: %1 = ix.kv_write %0, %one, %p1 : (!ix.tensor<[batch, 3, 2048, 64], bf16>, !ix.tensor<[batch, 3, 1, 64], bf16>, !ix.tensor<[batch, 1], i64>) -> !ix.tensor<[batch, 3, 2048, 64], bf16>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @writes(%cache: !ix.tensor<[batch, 3, 2048, 64], bf16>, %new: !ix.tensor<[batch, 3, seq, 64], bf16>, %pos: !ix.tensor<[batch, seq], i32>, %one: !ix.tensor<[batch, 3, 1, 64], bf16>, %p1: !ix.tensor<[batch, 1], i64>) {
  %0 = ix.kv_write %cache, %new, %pos : (!ix.tensor<[batch, 3, 2048, 64], bf16>, !ix.tensor<[batch, 3, seq, 64], bf16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 3, 2048, 64], bf16>
  %1 = ix.kv_write %0, %one, %p1 : (!ix.tensor<[batch, 3, 2048, 64], bf16>, !ix.tensor<[batch, 3, 1, 64], bf16>, !ix.tensor<[batch, 1], i64>) -> !ix.tensor<[batch, 3, 2048, 64], bf16>
  func.return
}

// CHECK-LABEL: func.func @symbolic_cache(
// CHECK-SAME: %cache: !ix.tensor<[batch, 2, ctx, 16], f32>, %new: !ix.tensor<[batch, 2, seq + 1, 16], f32>, %pos: !ix.tensor<[batch, seq + 1], i32>) -> !ix.tensor<[batch, 2, ctx, 16], f32> {
// CHECK-NEXT: %0 = ix.kv_write %cache, %new, %pos : (!ix.tensor<[batch, 2, ctx, 16], f32>, !ix.tensor<[batch, 2, seq + 1, 16], f32>, !ix.tensor<[batch, seq + 1], i32>) -> !ix.tensor<[batch, 2, ctx, 16], f32>
// CHECK-NEXT: func.return %0 : !ix.tensor<[batch, 2, ctx, 16], f32>
// CHECK-NEXT: }
func.func @symbolic_cache(%cache: !ix.tensor<[batch, 2, ctx, 16], f32>, %new: !ix.tensor<[batch, 2, seq + 1, 16], f32>, %pos: !ix.tensor<[batch, seq + 1], i32>) -> !ix.tensor<[batch, 2, ctx, 16], f32> {
  %0 = ix.kv_write %cache, %new, %pos : (!ix.tensor<[batch, 2, ctx, 16], f32>, !ix.tensor<[batch, 2, seq + 1, 16], f32>, !ix.tensor<[batch, seq + 1], i32>) -> !ix.tensor<[batch, 2, ctx, 16], f32>
  func.return %0 : !ix.tensor<[batch, 2, ctx, 16], f32>
}
