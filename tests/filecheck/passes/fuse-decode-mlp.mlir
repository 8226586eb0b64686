// RUN: inferx opt %s -p fuse-decode-mlp --split-input-file | filecheck %s

// A decode gate|up GEMM kernel and the down-projection kernel that reads its only result become
// one "mlp" kernel: the two bodies joined, the inputs of both without the joining value.
// CHECK-LABEL: func.func @decode_mlp
// CHECK:      %[[K:.*]] = ix.kernel "mlp"(%x, %[[G:.*]], %[[W1:.*]], %[[W2:.*]]) {name = "k1"}
// CHECK:        ix.rmsnorm
// CHECK-NEXT:   ix.linear
// CHECK-NEXT:   ix.slice
// CHECK-NEXT:   ix.slice
// CHECK-NEXT:   ix.silu
// CHECK-NEXT:   ix.mul
// CHECK-NEXT:   ix.linear
// CHECK-NEXT:   ix.add
// CHECK-NEXT:   ix.yield
// CHECK-NOT:  ix.kernel
// CHECK:      func.return %[[K]]
func.func @decode_mlp(%x: !ix.tensor<[batch, 1, 16], f32>) -> !ix.tensor<[batch, 1, 16], f32> {
  %g = ix.constant {value = 1.000000e+00 : f32} : !ix.tensor<[16], f32>
  %w1 = ix.weight {name = "w1"} : !ix.tensor<[48, 16], f32>
  %w2 = ix.weight {name = "w2"} : !ix.tensor<[16, 24], f32>
  %h = ix.kernel "gemm"(%x, %g, %w1) {name = "k0"} : (!ix.tensor<[batch, 1, 16], f32>, !ix.tensor<[16], f32>, !ix.tensor<[48, 16], f32>) -> !ix.tensor<[batch, 1, 24], f32> {
  ^bb0(%a: !ix.tensor<[batch, 1, 16], f32>, %b: !ix.tensor<[16], f32>, %c: !ix.tensor<[48, 16], f32>):
    %n = ix.rmsnorm %a, %b {eps = 1.000000e-06 : f64} : (!ix.tensor<[batch, 1, 16], f32>, !ix.tensor<[16], f32>) -> !ix.tensor<[batch, 1, 16], f32>
    %y = ix.linear %n, %c : !ix.tensor<[batch, 1, 16], f32>, !ix.tensor<[48, 16], f32> -> !ix.tensor<[batch, 1, 48], f32>
    %s0 = ix.slice %y {dim = -1 : i64, start = #ix.dim<0>, end = #ix.dim<48>, step = 2 : i64} : (!ix.tensor<[batch, 1, 48], f32>) -> !ix.tensor<[batch, 1, 24], f32>
    %s1 = ix.slice %y {dim = -1 : i64, start = #ix.dim<1>, end = #ix.dim<48>, step = 2 : i64} : (!ix.tensor<[batch, 1, 48], f32>) -> !ix.tensor<[batch, 1, 24], f32>
    %act = ix.silu %s0 : (!ix.tensor<[batch, 1, 24], f32>) -> !ix.tensor<[batch, 1, 24], f32>
    %m = ix.mul %act, %s1 : (!ix.tensor<[batch, 1, 24], f32>, !ix.tensor<[batch, 1, 24], f32>) -> !ix.tensor<[batch, 1, 24], f32>
    ix.yield %m : !ix.tensor<[batch, 1, 24], f32>
  }
  %o = ix.kernel "gemm"(%h, %w2, %x) {name = "k1"} : (!ix.tensor<[batch, 1, 24], f32>, !ix.tensor<[16, 24], f32>, !ix.tensor<[batch, 1, 16], f32>) -> !ix.tensor<[batch, 1, 16], f32> {
  ^bb0(%a: !ix.tensor<[batch, 1, 24], f32>, %b: !ix.tensor<[16, 24], f32>, %c: !ix.tensor<[batch, 1, 16], f32>):
    %y = ix.linear %a, %b : !ix.tensor<[batch, 1, 24], f32>, !ix.tensor<[16, 24], f32> -> !ix.tensor<[batch, 1, 16], f32>
    %r = ix.add %c, %y : (!ix.tensor<[batch, 1, 16], f32>, !ix.tensor<[batch, 1, 16], f32>) -> !ix.tensor<[batch, 1, 16], f32>
    ix.yield %r : !ix.tensor<[batch, 1, 16], f32>
  }
  func.return %o : !ix.tensor<[batch, 1, 16], f32>
}

// -----

// Negative: rows that hold seq (prefill), and an intermediate the function also returns (a
// second reader), keep both kernels.
// CHECK-LABEL: func.func @prefill_and_shared
// CHECK-NOT:  ix.kernel "mlp"
// CHECK-COUNT-4: ix.kernel "gemm"
// CHECK-NOT:  ix.kernel "mlp"
func.func @prefill_and_shared(%x: !ix.tensor<[batch, seq, 16], f32>, %z: !ix.tensor<[batch, 1, 16], f32>) -> (!ix.tensor<[batch, seq, 16], f32>, !ix.tensor<[batch, 1, 16], f32>, !ix.tensor<[batch, 1, 24], f32>) {
  %w1 = ix.weight {name = "w1"} : !ix.tensor<[48, 16], f32>
  %w2 = ix.weight {name = "w2"} : !ix.tensor<[16, 24], f32>
  %h = ix.kernel "gemm"(%x, %w1) {name = "k0"} : (!ix.tensor<[batch, seq, 16], f32>, !ix.tensor<[48, 16], f32>) -> !ix.tensor<[batch, seq, 24], f32> {
  ^bb0(%a: !ix.tensor<[batch, seq, 16], f32>, %c: !ix.tensor<[48, 16], f32>):
    %y = ix.linear %a, %c : !ix.tensor<[batch, seq, 16], f32>, !ix.tensor<[48, 16], f32> -> !ix.tensor<[batch, seq, 48], f32>
    %s0 = ix.slice %y {dim = -1 : i64, start = #ix.dim<0>, end = #ix.dim<48>, step = 2 : i64} : (!ix.tensor<[batch, seq, 48], f32>) -> !ix.tensor<[batch, seq, 24], f32>
    %s1 = ix.slice %y {dim = -1 : i64, start = #ix.dim<1>, end = #ix.dim<48>, step = 2 : i64} : (!ix.tensor<[batch, seq, 48], f32>) -> !ix.tensor<[batch, seq, 24], f32>
    %m = ix.mul %s0, %s1 : (!ix.tensor<[batch, seq, 24], f32>, !ix.tensor<[batch, seq, 24], f32>) -> !ix.tensor<[batch, seq, 24], f32>
    ix.yield %m : !ix.tensor<[batch, seq, 24], f32>
  }
  %o = ix.kernel "gemm"(%h, %w2) {name = "k1"} : (!ix.tensor<[batch, seq, 24], f32>, !ix.tensor<[16, 24], f32>) -> !ix.tensor<[batch, seq, 16], f32> {
  ^bb0(%a: !ix.tensor<[batch, seq, 24], f32>, %b: !ix.tensor<[16, 24], f32>):
    %y = ix.linear %a, %b : !ix.tensor<[batch, seq, 24], f32>, !ix.tensor<[16, 24], f32> -> !ix.tensor<[batch, seq, 16], f32>
    ix.yield %y : !ix.tensor<[batch, seq, 16], f32>
  }
  %h2 = ix.kernel "gemm"(%z, %w1) {name = "k2"} : (!ix.tensor<[batch, 1, 16], f32>, !ix.tensor<[48, 16], f32>) -> !ix.tensor<[batch, 1, 24], f32> {
  ^bb0(%a: !ix.tensor<[batch, 1, 16], f32>, %c: !ix.tensor<[48, 16], f32>):
    %y = ix.linear %a, %c : !ix.tensor<[batch, 1, 16], f32>, !ix.tensor<[48, 16], f32> -> !ix.tensor<[batch, 1, 48], f32>
    %s0 = ix.slice %y {dim = -1 : i64, start = #ix.dim<0>, end = #ix.dim<48>, step = 2 : i64} : (!ix.tensor<[batch, 1, 48], f32>) -> !ix.tensor<[batch, 1, 24], f32>
    %s1 = ix.slice %y {dim = -1 : i64, start = #ix.dim<1>, end = #ix.dim<48>, step = 2 : i64} : (!ix.tensor<[batch, 1, 48], f32>) -> !ix.tensor<[batch, 1, 24], f32>
    %m = ix.mul %s0, %s1 : (!ix.tensor<[batch, 1, 24], f32>, !ix.tensor<[batch, 1, 24], f32>) -> !ix.tensor<[batch, 1, 24], f32>
    ix.yield %m : !ix.tensor<[batch, 1, 24], f32>
  }
  %o2 = ix.kernel "gemm"(%h2, %w2) {name = "k3"} : (!ix.tensor<[batch, 1, 24], f32>, !ix.tensor<[16, 24], f32>) -> !ix.tensor<[batch, 1, 16], f32> {
  ^bb0(%a: !ix.tensor<[batch, 1, 24], f32>, %b: !ix.tensor<[16, 24], f32>):
    %y = ix.linear %a, %b : !ix.tensor<[batch, 1, 24], f32>, !ix.tensor<[16, 24], f32> -> !ix.tensor<[batch, 1, 16], f32>
    ix.yield %y : !ix.tensor<[batch, 1, 16], f32>
  }
  func.return %o, %o2, %h2 : !ix.tensor<[batch, seq, 16], f32>, !ix.tensor<[batch, 1, 16], f32>, !ix.tensor<[batch, 1, 24], f32>
}

// -----

// Negative: a down projection with a bias is not one the mlp template implements.
// CHECK-LABEL: func.func @biased
// CHECK-NOT:  ix.kernel "mlp"
// CHECK-COUNT-2: ix.kernel "gemm"
func.func @biased(%x: !ix.tensor<[batch, 1, 16], f32>) -> !ix.tensor<[batch, 1, 16], f32> {
  %w1 = ix.weight {name = "w1"} : !ix.tensor<[48, 16], f32>
  %w2 = ix.weight {name = "w2"} : !ix.tensor<[16, 24], f32>
  %b2 = ix.weight {name = "b2"} : !ix.tensor<[16], f32>
  %h = ix.kernel "gemm"(%x, %w1) {name = "k0"} : (!ix.tensor<[batch, 1, 16], f32>, !ix.tensor<[48, 16], f32>) -> !ix.tensor<[batch, 1, 24], f32> {
  ^bb0(%a: !ix.tensor<[batch, 1, 16], f32>, %c: !ix.tensor<[48, 16], f32>):
    %y = ix.linear %a, %c : !ix.tensor<[batch, 1, 16], f32>, !ix.tensor<[48, 16], f32> -> !ix.tensor<[batch, 1, 48], f32>
    %s0 = ix.slice %y {dim = -1 : i64, start = #ix.dim<0>, end = #ix.dim<48>, step = 2 : i64} : (!ix.tensor<[batch, 1, 48], f32>) -> !ix.tensor<[batch, 1, 24], f32>
    %s1 = ix.slice %y {dim = -1 : i64, start = #ix.dim<1>, end = #ix.dim<48>, step = 2 : i64} : (!ix.tensor<[batch, 1, 48], f32>) -> !ix.tensor<[batch, 1, 24], f32>
    %m = ix.mul %s0, %s1 : (!ix.tensor<[batch, 1, 24], f32>, !ix.tensor<[batch, 1, 24], f32>) -> !ix.tensor<[batch, 1, 24], f32>
    ix.yield %m : !ix.tensor<[batch, 1, 24], f32>
  }
  %o = ix.kernel "gemm"(%h, %w2, %b2) {name = "k1"} : (!ix.tensor<[batch, 1, 24], f32>, !ix.tensor<[16, 24], f32>, !ix.tensor<[16], f32>) -> !ix.tensor<[batch, 1, 16], f32> {
  ^bb0(%a: !ix.tensor<[batch, 1, 24], f32>, %b: !ix.tensor<[16, 24], f32>, %bb: !ix.tensor<[16], f32>):
    %y = ix.linear %a, %b bias %bb : !ix.tensor<[batch, 1, 24], f32>, !ix.tensor<[16, 24], f32> bias !ix.tensor<[16], f32> -> !ix.tensor<[batch, 1, 16], f32>
    ix.yield %y : !ix.tensor<[batch, 1, 16], f32>
  }
  func.return %o : !ix.tensor<[batch, 1, 16], f32>
}
