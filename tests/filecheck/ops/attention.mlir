// ix.attention: GQA over k/v (a KV cache or not), optional positions[batch, seq] and
// kv_lens[batch], and the attributes causal, window, softcap and scale.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @plain(
// CHECK-SAME: %q: !ix.tensor<[batch, 4, seq, 16], f32>, %k: !ix.tensor<[batch, 4, seq, 16], f32>) {
// CHECK-NEXT: %0 = ix.attention %q, %k, %k : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
// CHECK-NEXT: %1 = ix.attention %q, %k, %k {causal} : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
// CHECK-NEXT: %2 = ix.attention %q, %k, %k {causal, window = 4096 : i64, softcap = 5.000000e+01 : f64, scale = 1.250000e-01 : f64} : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @plain(%q: !ix.tensor<[batch, 4, seq, 16], f32>, %k: !ix.tensor<[batch, 4, seq, 16], f32>) {
  %0 = ix.attention %q, %k, %k : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  %1 = ix.attention %q, %k, %k {causal} : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  %2 = ix.attention %q, %k, %k {causal, window = 4096 : i64, softcap = 5.000000e+01 : f64, scale = 1.250000e-01 : f64} : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// CHECK-LABEL: func.func @kv_cache(
// CHECK-SAME: %q: !ix.tensor<[batch, 9, seq, 64], bf16>, %k: !ix.tensor<[batch, 3, ctx, 64], bf16>, %v: !ix.tensor<[batch, 3, ctx, 32], bf16>, %pos: !ix.tensor<[batch, seq], i32>, %lens: !ix.tensor<[batch], i32>) {
// CHECK-NEXT: %0 = ix.attention %q, %k, %v positions %pos kv_lens %lens {causal} : !ix.tensor<[batch, 9, seq, 64], bf16>, !ix.tensor<[batch, 3, ctx, 64], bf16>, !ix.tensor<[batch, 3, ctx, 32], bf16> positions !ix.tensor<[batch, seq], i32> kv_lens !ix.tensor<[batch], i32> -> !ix.tensor<[batch, 9, seq, 32], bf16>
// CHECK-NEXT: %1 = ix.attention %q, %k, %v positions %pos {causal, window = 128 : i64} : !ix.tensor<[batch, 9, seq, 64], bf16>, !ix.tensor<[batch, 3, ctx, 64], bf16>, !ix.tensor<[batch, 3, ctx, 32], bf16> positions !ix.tensor<[batch, seq], i32> -> !ix.tensor<[batch, 9, seq, 32], bf16>
// CHECK-NEXT: %2 = ix.attention %q, %k, %v kv_lens %lens {softcap = 3.000000e+01 : f64} : !ix.tensor<[batch, 9, seq, 64], bf16>, !ix.tensor<[batch, 3, ctx, 64], bf16>, !ix.tensor<[batch, 3, ctx, 32], bf16> kv_lens !ix.tensor<[batch], i32> -> !ix.tensor<[batch, 9, seq, 32], bf16>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @kv_cache(%q: !ix.tensor<[batch, 9, seq, 64], bf16>, %k: !ix.tensor<[batch, 3, ctx, 64], bf16>, %v: !ix.tensor<[batch, 3, ctx, 32], bf16>, %pos: !ix.tensor<[batch, seq], i32>, %lens: !ix.tensor<[batch], i32>) {
  %0 = ix.attention %q, %k, %v positions %pos kv_lens %lens {causal} : !ix.tensor<[batch, 9, seq, 64], bf16>, !ix.tensor<[batch, 3, ctx, 64], bf16>, !ix.tensor<[batch, 3, ctx, 32], bf16> positions !ix.tensor<[batch, seq], i32> kv_lens !ix.tensor<[batch], i32> -> !ix.tensor<[batch, 9, seq, 32], bf16>
  %1 = ix.attention %q, %k, %v positions %pos {causal, window = 128 : i64} : !ix.tensor<[batch, 9, seq, 64], bf16>, !ix.tensor<[batch, 3, ctx, 64], bf16>, !ix.tensor<[batch, 3, ctx, 32], bf16> positions !ix.tensor<[batch, seq], i32> -> !ix.tensor<[batch, 9, seq, 32], bf16>
  %2 = ix.attention %q, %k, %v kv_lens %lens {softcap = 3.000000e+01 : f64} : !ix.tensor<[batch, 9, seq, 64], bf16>, !ix.tensor<[batch, 3, ctx, 64], bf16>, !ix.tensor<[batch, 3, ctx, 32], bf16> kv_lens !ix.tensor<[batch], i32> -> !ix.tensor<[batch, 9, seq, 32], bf16>
  func.return
}

// CHECK-LABEL: func.func @decode(
// CHECK-SAME: %q: !ix.tensor<[batch, 8, 1, 64], f16>, %k: !ix.tensor<[batch, 1, ctx + 1, 64], f16>, %pos: !ix.tensor<[batch, 1], i64>, %lens: !ix.tensor<[batch], i64>) -> !ix.tensor<[batch, 8, 1, 64], f16> {
// CHECK-NEXT: %0 = ix.attention %q, %k, %k positions %pos kv_lens %lens {causal, scale = 1.000000e+00 : f64} : !ix.tensor<[batch, 8, 1, 64], f16>, !ix.tensor<[batch, 1, ctx + 1, 64], f16>, !ix.tensor<[batch, 1, ctx + 1, 64], f16> positions !ix.tensor<[batch, 1], i64> kv_lens !ix.tensor<[batch], i64> -> !ix.tensor<[batch, 8, 1, 64], f16>
// CHECK-NEXT: func.return %0 : !ix.tensor<[batch, 8, 1, 64], f16>
// CHECK-NEXT: }
func.func @decode(%q: !ix.tensor<[batch, 8, 1, 64], f16>, %k: !ix.tensor<[batch, 1, ctx + 1, 64], f16>, %pos: !ix.tensor<[batch, 1], i64>, %lens: !ix.tensor<[batch], i64>) -> !ix.tensor<[batch, 8, 1, 64], f16> {
  %0 = ix.attention %q, %k, %k positions %pos kv_lens %lens {causal, scale = 1.000000e+00 : f64} : !ix.tensor<[batch, 8, 1, 64], f16>, !ix.tensor<[batch, 1, ctx + 1, 64], f16>, !ix.tensor<[batch, 1, ctx + 1, 64], f16> positions !ix.tensor<[batch, 1], i64> kv_lens !ix.tensor<[batch], i64> -> !ix.tensor<[batch, 8, 1, 64], f16>
  func.return %0 : !ix.tensor<[batch, 8, 1, 64], f16>
}

// CHECK-LABEL: func.func @symbolic_heads(
// CHECK-SAME: %q: !ix.tensor<[batch, 2 * heads, seq, 64], f32>, %k: !ix.tensor<[batch, 2, seq, 64], f32>) {
// CHECK-NEXT: %0 = ix.attention %q, %k, %k : !ix.tensor<[batch, 2 * heads, seq, 64], f32>, !ix.tensor<[batch, 2, seq, 64], f32>, !ix.tensor<[batch, 2, seq, 64], f32> -> !ix.tensor<[batch, 2 * heads, seq, 64], f32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @symbolic_heads(%q: !ix.tensor<[batch, 2 * heads, seq, 64], f32>, %k: !ix.tensor<[batch, 2, seq, 64], f32>) {
  %0 = ix.attention %q, %k, %k : !ix.tensor<[batch, 2 * heads, seq, 64], f32>, !ix.tensor<[batch, 2, seq, 64], f32>, !ix.tensor<[batch, 2, seq, 64], f32> -> !ix.tensor<[batch, 2 * heads, seq, 64], f32>
  func.return
}
