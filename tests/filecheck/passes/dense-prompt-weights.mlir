// RUN: inferx opt %s -p "dense-prompt-weights{min-rows=129}" --split-input-file | filecheck %s

// Two prompt GEMMs on int4 weights: each gets a dequant kernel before it, which dequantizes its
// codes (the norm's weight folded in, where its body starts with one) into one buffer the size
// of the larger weight; the second writes over the first (into); each qlinear reads its own
// (dense), and states the rows from which it does (dense_min_rows).
// CHECK-LABEL: func.func @prompt
// CHECK:      %[[D0:.*]] = ix.kernel "dequant"(%c0, %s0, %m0, %g) {name = "k0_w"}
// CHECK-NEXT: ^{{.*}}:
// CHECK-NEXT:   %{{.*}} = ix.dequantize %{{.*}}, %{{.*}} mins %{{.*}} norm_weight %{{.*}} {group = 32 : i64, min_rows = 129 : i64, rows = #ix.dim<batch * seq>} : {{.*}} -> !ix.tensor<[2048], f16>
// CHECK:      %[[H:.*]] = ix.kernel "qgemm"(%x, %g, %c0, %s0, %m0, %[[D0]]) {name = "k0"}
// CHECK:        ix.qlinear {{.*}} dense %{{.*}} {group = 32 : i64, dense_min_rows = 129 : i64}
// CHECK:      %[[D1:.*]] = ix.kernel "dequant"(%c1, %s1, %[[D0]]) {name = "k1_w"}
// CHECK:        ix.dequantize %{{.*}}, %{{.*}} into %{{.*}} {group = 32 : i64, min_rows = 129 : i64, rows = #ix.dim<batch * seq>}
// CHECK:      ix.kernel "qgemm"(%[[H]], %c1, %s1, %[[D1]]) {name = "k1"}
// CHECK:        ix.qlinear {{.*}} dense
func.func @prompt(%x: !ix.tensor<[batch, seq, 64], f16>) -> !ix.tensor<[batch, seq, 16], f16> {
  %g = ix.weight {name = "g"} : !ix.tensor<[64], f16>
  %c0 = ix.weight {name = "c0"} : !ix.tensor<[32, 64], i4>
  %s0 = ix.weight {name = "s0"} : !ix.tensor<[32, 2], f16>
  %m0 = ix.weight {name = "m0"} : !ix.tensor<[32, 2], f16>
  %c1 = ix.weight {name = "c1"} : !ix.tensor<[16, 32], i4>
  %s1 = ix.weight {name = "s1"} : !ix.tensor<[16, 1], f16>
  %h = ix.kernel "qgemm"(%x, %g, %c0, %s0, %m0) {name = "k0"} : (!ix.tensor<[batch, seq, 64], f16>, !ix.tensor<[64], f16>, !ix.tensor<[32, 64], i4>, !ix.tensor<[32, 2], f16>, !ix.tensor<[32, 2], f16>) -> !ix.tensor<[batch, seq, 32], f16> {
  ^bb0(%a: !ix.tensor<[batch, seq, 64], f16>, %b: !ix.tensor<[64], f16>, %c: !ix.tensor<[32, 64], i4>, %s: !ix.tensor<[32, 2], f16>, %m: !ix.tensor<[32, 2], f16>):
    %n = ix.rmsnorm %a, %b {eps = 1.000000e-06 : f64} : (!ix.tensor<[batch, seq, 64], f16>, !ix.tensor<[64], f16>) -> !ix.tensor<[batch, seq, 64], f16>
    %y = ix.qlinear %n, %c, %s mins %m {group = 32} : !ix.tensor<[batch, seq, 64], f16>, !ix.tensor<[32, 64], i4>, !ix.tensor<[32, 2], f16> mins !ix.tensor<[32, 2], f16> -> !ix.tensor<[batch, seq, 32], f16>
    ix.yield %y : !ix.tensor<[batch, seq, 32], f16>
  }
  %o = ix.kernel "qgemm"(%h, %c1, %s1) {name = "k1"} : (!ix.tensor<[batch, seq, 32], f16>, !ix.tensor<[16, 32], i4>, !ix.tensor<[16, 1], f16>) -> !ix.tensor<[batch, seq, 16], f16> {
  ^bb0(%a: !ix.tensor<[batch, seq, 32], f16>, %c: !ix.tensor<[16, 32], i4>, %s: !ix.tensor<[16, 1], f16>):
    %y = ix.qlinear %a, %c, %s {group = 32} : !ix.tensor<[batch, seq, 32], f16>, !ix.tensor<[16, 32], i4>, !ix.tensor<[16, 1], f16> -> !ix.tensor<[batch, seq, 16], f16>
    ix.yield %y : !ix.tensor<[batch, seq, 16], f16>
  }
  func.return %o : !ix.tensor<[batch, seq, 16], f16>
}

// -----

// Negative: decode rows (no seq) and an f32 x keep the codes.
// CHECK-LABEL: func.func @decode_and_f32
// CHECK-NOT:  ix.kernel "dequant"
// CHECK-NOT:  dense
func.func @decode_and_f32(%x: !ix.tensor<[batch, 1, 64], f16>, %z: !ix.tensor<[batch, seq, 64], f32>) -> (!ix.tensor<[batch, 1, 16], f16>, !ix.tensor<[batch, seq, 16], f32>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], f16>
  %s2 = ix.weight {name = "s2"} : !ix.tensor<[16, 2], f32>
  %o = ix.kernel "qgemm"(%x, %c, %s) {name = "k0"} : (!ix.tensor<[batch, 1, 64], f16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], f16>) -> !ix.tensor<[batch, 1, 16], f16> {
  ^bb0(%a: !ix.tensor<[batch, 1, 64], f16>, %cc: !ix.tensor<[16, 64], i4>, %ss: !ix.tensor<[16, 2], f16>):
    %y = ix.qlinear %a, %cc, %ss {group = 32} : !ix.tensor<[batch, 1, 64], f16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], f16> -> !ix.tensor<[batch, 1, 16], f16>
    ix.yield %y : !ix.tensor<[batch, 1, 16], f16>
  }
  %p = ix.kernel "qgemm"(%z, %c, %s2) {name = "k1"} : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], f32>) -> !ix.tensor<[batch, seq, 16], f32> {
  ^bb0(%a: !ix.tensor<[batch, seq, 64], f32>, %cc: !ix.tensor<[16, 64], i4>, %ss: !ix.tensor<[16, 2], f32>):
    %y = ix.qlinear %a, %cc, %ss {group = 32} : !ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], f32> -> !ix.tensor<[batch, seq, 16], f32>
    ix.yield %y : !ix.tensor<[batch, seq, 16], f32>
  }
  func.return %o, %p : !ix.tensor<[batch, 1, 16], f16>, !ix.tensor<[batch, seq, 16], f32>
}
