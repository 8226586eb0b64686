// ix.qlinear: x[..., K] times an int4 weight [N, K] given as codes (i4), group scales and, for an
// asymmetric scheme, group minimums; an optional per-column scale and an optional bias [N].
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @qlinears(
// CHECK: %0 = ix.qlinear %x, %c, %s {group = 32 : i64} : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> -> !ix.tensor<[batch, seq, 16], bf16>
// CHECK-NEXT: %1 = ix.qlinear %x, %c, %s mins %m {group = 32 : i64} : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> mins !ix.tensor<[16, 2], bf16> -> !ix.tensor<[batch, seq, 16], bf16>
// CHECK-NEXT: %2 = ix.qlinear %x, %c, %s mins %m col_scale %k {group = 32 : i64} : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> mins !ix.tensor<[16, 2], bf16> col_scale !ix.tensor<[64], bf16> -> !ix.tensor<[batch, seq, 16], bf16>
// CHECK-NEXT: %3 = ix.qlinear %v, %c2, %s2 {group = 64 : i64} : !ix.tensor<[64], bf16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 1], f32> -> !ix.tensor<[16], bf16>
// CHECK-NEXT: %4 = ix.qlinear %x, %c, %s mins %m bias %b {group = 32 : i64} : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> mins !ix.tensor<[16, 2], bf16> bias !ix.tensor<[16], bf16> -> !ix.tensor<[batch, seq, 16], bf16>
// CHECK-NEXT: func.return
func.func @qlinears(%x: !ix.tensor<[batch, seq, 64], bf16>, %v: !ix.tensor<[64], bf16>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], bf16>
  %m = ix.weight {name = "m"} : !ix.tensor<[16, 2], bf16>
  %k = ix.weight {name = "k"} : !ix.tensor<[64], bf16>
  %c2 = ix.weight {name = "c2"} : !ix.tensor<[16, 64], i4>
  %s2 = ix.weight {name = "s2"} : !ix.tensor<[16, 1], f32>
  %b = ix.weight {name = "b"} : !ix.tensor<[16], bf16>
  %0 = ix.qlinear %x, %c, %s {group = 32} : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> -> !ix.tensor<[batch, seq, 16], bf16>
  %1 = ix.qlinear %x, %c, %s mins %m {group = 32} : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> mins !ix.tensor<[16, 2], bf16> -> !ix.tensor<[batch, seq, 16], bf16>
  %2 = ix.qlinear %x, %c, %s mins %m col_scale %k {group = 32} : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> mins !ix.tensor<[16, 2], bf16> col_scale !ix.tensor<[64], bf16> -> !ix.tensor<[batch, seq, 16], bf16>
  %3 = ix.qlinear %v, %c2, %s2 {group = 64} : !ix.tensor<[64], bf16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 1], f32> -> !ix.tensor<[16], bf16>
  %4 = ix.qlinear %x, %c, %s mins %m bias %b {group = 32} : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> mins !ix.tensor<[16, 2], bf16> bias !ix.tensor<[16], bf16> -> !ix.tensor<[batch, seq, 16], bf16>
  func.return
}
