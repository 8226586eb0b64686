// RUN: inferx opt %s -p 'page-kv{block-size=16 blocks=40 blocks-per-seq=8}' | filecheck %s
// RUN: inferx opt %s -p 'page-kv{block-size=16 blocks=40 blocks-per-seq=8}' > %t && inferx opt %t > %t.2 && diff %t %t.2
// RUN: inferx opt %s -p 'quantize-kv,page-kv{block-size=16 blocks=40 blocks-per-seq=8}' | filecheck %s --check-prefix=FP8

// Each cache argument a kv_write writes becomes a pool of blocks; a block_table argument comes
// before the first of them; the writes and the attention take it; the function's type follows.
// CHECK-LABEL: func.func @decode(
// CHECK-SAME: %lens: !ix.tensor<[batch], i32>, %block_table: !ix.tensor<[batch, 8], i32>, %k0: !ix.tensor<[40, 2, 16, 16], f32>, %v0: !ix.tensor<[40, 2, 16, 16], f32>)
// CHECK-SAME: -> (!ix.tensor<[batch, 4, 1, 16], f32>, !ix.tensor<[40, 2, 16, 16], f32>, !ix.tensor<[40, 2, 16, 16], f32>)
// CHECK: %[[KC:.*]] = ix.kv_write %k0, %k, %pos block_table %block_table : {{.*}} -> !ix.tensor<[40, 2, 16, 16], f32>
// CHECK: %[[VC:.*]] = ix.kv_write %v0, %v, %pos block_table %block_table : {{.*}} -> !ix.tensor<[40, 2, 16, 16], f32>
// CHECK: ix.attention %q, %[[KC]], %[[VC]] positions %pos kv_lens %lens block_table %block_table {causal}
// CHECK: func.return

// A cache in E4M3 stays so, and its writes keep their scales.
// FP8: ix.kv_write %k0, %k, %pos, %{{.*}} block_table %block_table : {{.*}} -> !ix.tensor<[40, 2, 16, 16], f8e4m3>
// FP8: ix.attention {{.*}} k_scale %{{.*}} v_scale %{{.*}} block_table %block_table {causal}
func.func @decode(%q: !ix.tensor<[batch, 4, 1, 16], f32>, %k: !ix.tensor<[batch, 2, 1, 16], f32>, %v: !ix.tensor<[batch, 2, 1, 16], f32>, %pos: !ix.tensor<[batch, 1], i32>, %lens: !ix.tensor<[batch], i32>, %k0: !ix.tensor<[batch, 2, ctx, 16], f32>, %v0: !ix.tensor<[batch, 2, ctx, 16], f32>) -> (!ix.tensor<[batch, 4, 1, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32>) {
  %kc = ix.kv_write %k0, %k, %pos : (!ix.tensor<[batch, 2, ctx, 16], f32>, !ix.tensor<[batch, 2, 1, 16], f32>, !ix.tensor<[batch, 1], i32>) -> !ix.tensor<[batch, 2, ctx, 16], f32>
  %vc = ix.kv_write %v0, %v, %pos : (!ix.tensor<[batch, 2, ctx, 16], f32>, !ix.tensor<[batch, 2, 1, 16], f32>, !ix.tensor<[batch, 1], i32>) -> !ix.tensor<[batch, 2, ctx, 16], f32>
  %a = ix.attention %q, %kc, %vc positions %pos kv_lens %lens {causal} : !ix.tensor<[batch, 4, 1, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32> positions !ix.tensor<[batch, 1], i32> kv_lens !ix.tensor<[batch], i32> -> !ix.tensor<[batch, 4, 1, 16], f32>
  func.return %a, %kc, %vc : !ix.tensor<[batch, 4, 1, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32>
}

// A function without a cache is left as it is.
// CHECK-LABEL: func.func @plain(%x: !ix.tensor<[batch, 4], f32>) -> !ix.tensor<[batch, 4], f32>
func.func @plain(%x: !ix.tensor<[batch, 4], f32>) -> !ix.tensor<[batch, 4], f32> {
  func.return %x : !ix.tensor<[batch, 4], f32>
}
