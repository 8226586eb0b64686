// ix.dequantize: an int4 weight (an ix.qlinear's codes, scales and minimums) dequantized, times
// an optional column scale and norm weight, written flat into the start of a 1-D buffer; an
// ix.qlinear's `dense` operand reads it.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @dequantizes(
// CHECK: %0 = ix.dequantize %c, %s mins %m norm_weight %g {group = 32 : i64, min_rows = 129 : i64, rows = #ix.dim<batch * seq>} : !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> mins !ix.tensor<[16, 2], bf16> norm_weight !ix.tensor<[64], bf16> -> !ix.tensor<[2048], bf16>
// CHECK-NEXT: %1 = ix.dequantize %c2, %s2 into %0 {group = 32 : i64, min_rows = 1 : i64, rows = #ix.dim<batch * seq>} : !ix.tensor<[32, 64], i4>, !ix.tensor<[32, 2], bf16> into !ix.tensor<[2048], bf16> -> !ix.tensor<[2048], bf16>
// CHECK-NEXT: %2 = ix.qlinear %x, %c, %s mins %m dense %0 {group = 32 : i64} : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> mins !ix.tensor<[16, 2], bf16> dense !ix.tensor<[2048], bf16> -> !ix.tensor<[batch, seq, 16], bf16>
// CHECK-NEXT: func.return
func.func @dequantizes(%x: !ix.tensor<[batch, seq, 64], bf16>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %c2 = ix.weight {name = "c2"} : !ix.tensor<[32, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], bf16>
  %s2 = ix.weight {name = "s2"} : !ix.tensor<[32, 2], bf16>
  %m = ix.weight {name = "m"} : !ix.tensor<[16, 2], bf16>
  %g = ix.weight {name = "g"} : !ix.tensor<[64], bf16>
  %0 = ix.dequantize %c, %s mins %m norm_weight %g {group = 32, min_rows = 129, rows = #ix.dim<batch * seq>} : !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> mins !ix.tensor<[16, 2], bf16> norm_weight !ix.tensor<[64], bf16> -> !ix.tensor<[2048], bf16>
  %1 = ix.dequantize %c2, %s2 into %0 {group = 32, min_rows = 1, rows = #ix.dim<batch*seq>} : !ix.tensor<[32, 64], i4>, !ix.tensor<[32, 2], bf16> into !ix.tensor<[2048], bf16> -> !ix.tensor<[2048], bf16>
  %2 = ix.qlinear %x, %c, %s mins %m dense %0 {group = 32} : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> mins !ix.tensor<[16, 2], bf16> dense !ix.tensor<[2048], bf16> -> !ix.tensor<[batch, seq, 16], bf16>
  func.return
}
