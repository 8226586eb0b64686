// The !ix.tensor type and the #ix.dim attribute: every element type, static and symbolic dims,
// and the canonical form that symbolic dims re-print in (spacing, term order, folding).
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @dtypes(
// CHECK-SAME: %a: !ix.tensor<[2], f32>, %b: !ix.tensor<[2], f16>, %c: !ix.tensor<[2], bf16>, %d: !ix.tensor<[2], f8e4m3>, %e: !ix.tensor<[2], i8>, %f: !ix.tensor<[2], i4>, %g: !ix.tensor<[2], i32>, %h: !ix.tensor<[2], i64>, %i: !ix.tensor<[2], bool>) {
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @dtypes(%a: !ix.tensor<[2], f32>, %b: !ix.tensor<[2], f16>, %c: !ix.tensor<[2], bf16>, %d: !ix.tensor<[2], f8e4m3>, %e: !ix.tensor<[2], i8>, %f: !ix.tensor<[2], i4>, %g: !ix.tensor<[2], i32>, %h: !ix.tensor<[2], i64>, %i: !ix.tensor<[2], bool>) {
  func.return
}

// CHECK-LABEL: func.func @scalar(
// CHECK-SAME: %a: !ix.tensor<[], f32>) -> !ix.tensor<[], f32> {
// CHECK-NEXT: func.return %a : !ix.tensor<[], f32>
// CHECK-NEXT: }
func.func @scalar(%a: !ix.tensor<[], f32>) -> !ix.tensor<[], f32> {
  func.return %a : !ix.tensor<[], f32>
}

// CHECK-LABEL: func.func @symbolic(
// CHECK-SAME: %a: !ix.tensor<[batch, seq, 64], bf16>, %b: !ix.tensor<[seq + 1, batch * seq, seq floordiv 2], f32>, %c: !ix.tensor<[4 * seq + 1, ctx - seq, 2 * batch * seq], f16>) {
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @symbolic(%a: !ix.tensor<[batch, seq, 64], bf16>, %b: !ix.tensor<[seq + 1, batch * seq, seq floordiv 2], f32>, %c: !ix.tensor<[4 * seq + 1, ctx - seq, 2 * batch * seq], f16>) {
  func.return
}

// CHECK-LABEL: func.func @canonical(
// CHECK-SAME: %a: !ix.tensor<[seq + 1, seq + 1, seq, batch * seq, seq], f32>, %b: !ix.tensor<[3, 2 * seq + 2, seq * seq - 4, seq - 1], f32>) {
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @canonical(%a: !ix.tensor<[seq+1, 1+seq, 2*seq - seq, seq*batch, (seq)], f32>, %b: !ix.tensor<[seq - seq + 3, 2 * (seq + 1), (seq + 2) * (seq - 2), -1 + seq], f32>) {
  func.return
}

// CHECK-LABEL: func.func @canonical_floordiv(
// CHECK-SAME: %a: !ix.tensor<[seq, seq + ((seq + 1) floordiv 2), seq + 1, 3, seq], f32>, %b: !ix.tensor<[seq floordiv 6, (seq + 1) floordiv 2, batch + 2 * seq, (batch * seq) floordiv 8, 2 * (seq floordiv 2)], f32>) {
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @canonical_floordiv(%a: !ix.tensor<[(2 * seq) floordiv 2, (3 * seq + 1) floordiv 2, (4 * seq + 6) floordiv 4, 7 floordiv 2, seq floordiv 1], f32>, %b: !ix.tensor<[(seq floordiv 2) floordiv 3, (2 * seq + 2) floordiv 4, (4 * seq + 2 * batch) floordiv 2, (batch * seq) floordiv 8, 2 * (seq floordiv 2)], f32>) {
  func.return
}

// CHECK-LABEL: func.func @dim_attrs(
// CHECK-SAME: %x: !ix.tensor<[seq + 8], f32>) -> !ix.tensor<[seq], f32> {
// CHECK-NEXT: %0 = ix.slice %x {dim = 0 : i64, start = #ix.dim<0>, end = #ix.dim<seq>} : (!ix.tensor<[seq + 8], f32>) -> !ix.tensor<[seq], f32>
// CHECK-NEXT: %1 = ix.slice %x {dim = 0 : i64, start = #ix.dim<seq>, end = #ix.dim<seq + 8>} : (!ix.tensor<[seq + 8], f32>) -> !ix.tensor<[8], f32>
// CHECK-NEXT: func.return %0 : !ix.tensor<[seq], f32>
// CHECK-NEXT: }
func.func @dim_attrs(%x: !ix.tensor<[seq + 8], f32>) -> !ix.tensor<[seq], f32> {
  %0 = ix.slice %x {dim = 0 : i64, start = #ix.dim<3+5-8+seq-seq>, end = #ix.dim<seq>} : (!ix.tensor<[seq + 8], f32>) -> !ix.tensor<[seq], f32>
  %1 = ix.slice %x {dim = 0 : i64, start = #ix.dim<2*seq - seq>, end = #ix.dim<(2 * seq + 16) floordiv 2>} : (!ix.tensor<[seq + 8], f32>) -> !ix.tensor<[(seq + 8) - seq], f32>
  func.return %0 : !ix.tensor<[seq], f32>
}
