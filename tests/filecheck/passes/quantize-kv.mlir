// RUN: inferx opt %s -p 'quantize-kv' | filecheck %s

// Each cache argument a kv_write writes becomes f8e4m3 with a per-head scale weight named after
// it; the writes take the scale, the attention both; the function's type follows.
// CHECK-LABEL: func.func @decode(
// CHECK-SAME: %k0: !ix.tensor<[batch, 2, ctx, 16], f8e4m3>, %v0: !ix.tensor<[batch, 2, ctx, 16], f8e4m3>
// CHECK-SAME: -> (!ix.tensor<[batch, 4, 1, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f8e4m3>, !ix.tensor<[batch, 2, ctx, 16], f8e4m3>)
// CHECK-DAG: %[[VS:.*]] = ix.weight {name = "kv.v0.scale"} : !ix.tensor<[2], f32>
// CHECK-DAG: %[[KS:.*]] = ix.weight {name = "kv.k0.scale"} : !ix.tensor<[2], f32>
// CHECK: %[[KC:.*]] = ix.kv_write %k0, %k, %pos, %[[KS]] : {{.*}} -> !ix.tensor<[batch, 2, ctx, 16], f8e4m3>
// CHECK: %[[VC:.*]] = ix.kv_write %v0, %v, %pos, %[[VS]] : {{.*}} -> !ix.tensor<[batch, 2, ctx, 16], f8e4m3>
// CHECK: ix.attention %q, %[[KC]], %[[VC]] positions %pos kv_lens %lens k_scale %[[KS]] v_scale %[[VS]] {causal}
// CHECK: func.return
func.func @decode(%q: !ix.tensor<[batch, 4, 1, 16], f32>, %k: !ix.tensor<[batch, 2, 1, 16], f32>, %v: !ix.tensor<[batch, 2, 1, 16], f32>, %pos: !ix.tensor<[batch, 1], i32>, %lens: !ix.tensor<[batch], i32>, %k0: !ix.tensor<[batch, 2, ctx, 16], f32>, %v0: !ix.tensor<[batch, 2, ctx, 16], f32>) -> (!ix.tensor<[batch, 4, 1, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32>) {
  %kc = ix.kv_write %k0, %k, %pos : (!ix.tensor<[batch, 2, ctx, 16], f32>, !ix.tensor<[batch, 2, 1, 16], f32>, !ix.tensor<[batch, 1], i32>) -> !ix.tensor<[batch, 2, ctx, 16], f32>
  %vc = ix.kv_write %v0, %v, %pos : (!ix.tensor<[batch, 2, ctx, 16], f32>, !ix.tensor<[batch, 2, 1, 16], f32>, !ix.tensor<[batch, 1], i32>) -> !ix.tensor<[batch, 2, ctx, 16], f32>
  %a = ix.attention %q, %kc, %vc positions %pos kv_lens %lens {causal} : !ix.tensor<[batch, 4, 1, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32> positions !ix.tensor<[batch, 1], i32> kv_lens !ix.tensor<[batch], i32> -> !ix.tensor<[batch, 4, 1, 16], f32>
  func.return %a, %kc, %vc : !ix.tensor<[batch, 4, 1, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32>
}
