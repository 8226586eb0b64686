// RUN: inferx opt %s -p fuse-decode-attention-o --split-input-file | filecheck %s

// A decode attention kernel and the o-projection kernel that reads its only result become one
// "attention_o" kernel: the two bodies joined, the inputs of both without the joining value.
// CHECK-LABEL: func.func @decode_attention_o
// CHECK:      %[[K:.*]] = ix.kernel "attention_o"(%q, %k, %v, %pos, %lens, %[[W:.*]], %x) {name = "k1"}
// CHECK:        ix.attention
// CHECK-NEXT:   ix.transpose
// CHECK-NEXT:   ix.reshape
// CHECK-NEXT:   ix.linear
// CHECK-NEXT:   ix.add
// CHECK-NEXT:   ix.yield
// CHECK-NOT:  ix.kernel
// CHECK:      func.return %[[K]]
func.func @decode_attention_o(%q: !ix.tensor<[batch, 4, 1, 8], f32>, %k: !ix.tensor<[batch, 2, ctx, 8], f32>, %v: !ix.tensor<[batch, 2, ctx, 8], f32>, %pos: !ix.tensor<[batch, 1], i32>, %lens: !ix.tensor<[batch], i32>, %x: !ix.tensor<[batch, 1, 32], f32>) -> !ix.tensor<[batch, 1, 32], f32> {
  %w = ix.weight {name = "wo"} : !ix.tensor<[32, 32], f32>
  %a = ix.kernel "attention"(%q, %k, %v, %pos, %lens) {name = "k0"} : (!ix.tensor<[batch, 4, 1, 8], f32>, !ix.tensor<[batch, 2, ctx, 8], f32>, !ix.tensor<[batch, 2, ctx, 8], f32>, !ix.tensor<[batch, 1], i32>, !ix.tensor<[batch], i32>) -> !ix.tensor<[batch, 1, 32], f32> {
  ^bb0(%q1: !ix.tensor<[batch, 4, 1, 8], f32>, %k1: !ix.tensor<[batch, 2, ctx, 8], f32>, %v1: !ix.tensor<[batch, 2, ctx, 8], f32>, %p1: !ix.tensor<[batch, 1], i32>, %l1: !ix.tensor<[batch], i32>):
    %o = ix.attention %q1, %k1, %v1 positions %p1 kv_lens %l1 {causal, scale = 0.35355339059327379 : f64} : !ix.tensor<[batch, 4, 1, 8], f32>, !ix.tensor<[batch, 2, ctx, 8], f32>, !ix.tensor<[batch, 2, ctx, 8], f32> positions !ix.tensor<[batch, 1], i32> kv_lens !ix.tensor<[batch], i32> -> !ix.tensor<[batch, 4, 1, 8], f32>
    %t = ix.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (!ix.tensor<[batch, 4, 1, 8], f32>) -> !ix.tensor<[batch, 1, 4, 8], f32>
    %r = ix.reshape %t : (!ix.tensor<[batch, 1, 4, 8], f32>) -> !ix.tensor<[batch, 1, 32], f32>
    ix.yield %r : !ix.tensor<[batch, 1, 32], f32>
  }
  %y = ix.kernel "gemm"(%a, %w, %x) {name = "k1"} : (!ix.tensor<[batch, 1, 32], f32>, !ix.tensor<[32, 32], f32>, !ix.tensor<[batch, 1, 32], f32>) -> !ix.tensor<[batch, 1, 32], f32> {
  ^bb0(%a1: !ix.tensor<[batch, 1, 32], f32>, %w1: !ix.tensor<[32, 32], f32>, %x1: !ix.tensor<[batch, 1, 32], f32>):
    %l = ix.linear %a1, %w1 : !ix.tensor<[batch, 1, 32], f32>, !ix.tensor<[32, 32], f32> -> !ix.tensor<[batch, 1, 32], f32>
    %s = ix.add %x1, %l : (!ix.tensor<[batch, 1, 32], f32>, !ix.tensor<[batch, 1, 32], f32>) -> !ix.tensor<[batch, 1, 32], f32>
    ix.yield %s : !ix.tensor<[batch, 1, 32], f32>
  }
  func.return %y : !ix.tensor<[batch, 1, 32], f32>
}

// -----

// Negative: prefill attention (a query per token) keeps both kernels, and so does a projection
// with a bias (not one the attention_o template implements).
// CHECK-LABEL: func.func @prefill_and_bias
// CHECK-NOT:  ix.kernel "attention_o"
// CHECK-COUNT-2: ix.kernel "attention"
// CHECK-NOT:  ix.kernel "attention_o"
func.func @prefill_and_bias(%q: !ix.tensor<[batch, 4, seq, 8], f32>, %k: !ix.tensor<[batch, 2, ctx, 8], f32>, %v: !ix.tensor<[batch, 2, ctx, 8], f32>, %pos: !ix.tensor<[batch, seq], i32>, %qd: !ix.tensor<[batch, 4, 1, 8], f32>, %pd: !ix.tensor<[batch, 1], i32>) -> (!ix.tensor<[batch, seq, 32], f32>, !ix.tensor<[batch, 1, 32], f32>) {
  %w = ix.weight {name = "wo"} : !ix.tensor<[32, 32], f32>
  %b = ix.weight {name = "bo"} : !ix.tensor<[32], f32>
  %a = ix.kernel "attention"(%q, %k, %v, %pos) {name = "k0"} : (!ix.tensor<[batch, 4, seq, 8], f32>, !ix.tensor<[batch, 2, ctx, 8], f32>, !ix.tensor<[batch, 2, ctx, 8], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, seq, 32], f32> {
  ^bb0(%q1: !ix.tensor<[batch, 4, seq, 8], f32>, %k1: !ix.tensor<[batch, 2, ctx, 8], f32>, %v1: !ix.tensor<[batch, 2, ctx, 8], f32>, %p1: !ix.tensor<[batch, seq], i32>):
    %o = ix.attention %q1, %k1, %v1 positions %p1 {causal, scale = 0.35355339059327379 : f64} : !ix.tensor<[batch, 4, seq, 8], f32>, !ix.tensor<[batch, 2, ctx, 8], f32>, !ix.tensor<[batch, 2, ctx, 8], f32> positions !ix.tensor<[batch, seq], i32> -> !ix.tensor<[batch, 4, seq, 8], f32>
    %t = ix.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (!ix.tensor<[batch, 4, seq, 8], f32>) -> !ix.tensor<[batch, seq, 4, 8], f32>
    %r = ix.reshape %t : (!ix.tensor<[batch, seq, 4, 8], f32>) -> !ix.tensor<[batch, seq, 32], f32>
    ix.yield %r : !ix.tensor<[batch, seq, 32], f32>
  }
  %y = ix.kernel "gemm"(%a, %w) {name = "k1"} : (!ix.tensor<[batch, seq, 32], f32>, !ix.tensor<[32, 32], f32>) -> !ix.tensor<[batch, seq, 32], f32> {
  ^bb0(%a1: !ix.tensor<[batch, seq, 32], f32>, %w1: !ix.tensor<[32, 32], f32>):
    %l = ix.linear %a1, %w1 : !ix.tensor<[batch, seq, 32], f32>, !ix.tensor<[32, 32], f32> -> !ix.tensor<[batch, seq, 32], f32>
    ix.yield %l : !ix.tensor<[batch, seq, 32], f32>
  }
  %ad = ix.kernel "attention"(%qd, %k, %v, %pd) {name = "k2"} : (!ix.tensor<[batch, 4, 1, 8], f32>, !ix.tensor<[batch, 2, ctx, 8], f32>, !ix.tensor<[batch, 2, ctx, 8], f32>, !ix.tensor<[batch, 1], i32>) -> !ix.tensor<[batch, 1, 32], f32> {
  ^bb0(%q1: !ix.tensor<[batch, 4, 1, 8], f32>, %k1: !ix.tensor<[batch, 2, ctx, 8], f32>, %v1: !ix.tensor<[batch, 2, ctx, 8], f32>, %p1: !ix.tensor<[batch, 1], i32>):
    %o = ix.attention %q1, %k1, %v1 positions %p1 {causal, scale = 0.35355339059327379 : f64} : !ix.tensor<[batch, 4, 1, 8], f32>, !ix.tensor<[batch, 2, ctx, 8], f32>, !ix.tensor<[batch, 2, ctx, 8], f32> positions !ix.tensor<[batch, 1], i32> -> !ix.tensor<[batch, 4, 1, 8], f32>
    %t = ix.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (!ix.tensor<[batch, 4, 1, 8], f32>) -> !ix.tensor<[batch, 1, 4, 8], f32>
    %r = ix.reshape %t : (!ix.tensor<[batch, 1, 4, 8], f32>) -> !ix.tensor<[batch, 1, 32], f32>
    ix.yield %r : !ix.tensor<[batch, 1, 32], f32>
  }
  %yd = ix.kernel "gemm"(%ad, %w, %b) {name = "k3"} : (!ix.tensor<[batch, 1, 32], f32>, !ix.tensor<[32, 32], f32>, !ix.tensor<[32], f32>) -> !ix.tensor<[batch, 1, 32], f32> {
  ^bb0(%a1: !ix.tensor<[batch, 1, 32], f32>, %w1: !ix.tensor<[32, 32], f32>, %b1: !ix.tensor<[32], f32>):
    %l = ix.linear %a1, %w1 bias %b1 : !ix.tensor<[batch, 1, 32], f32>, !ix.tensor<[32, 32], f32> bias !ix.tensor<[32], f32> -> !ix.tensor<[batch, 1, 32], f32>
    ix.yield %l : !ix.tensor<[batch, 1, 32], f32>
  }
  func.return %y, %yd : !ix.tensor<[batch, seq, 32], f32>, !ix.tensor<[batch, 1, 32], f32>
}
