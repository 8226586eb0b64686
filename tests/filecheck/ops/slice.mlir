// ix.slice: start and end are #ix.dim bounds (or plain integers), step defaults to 1; the result
// size is (end - start + step - 1) floordiv step, symbolic included.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @slices(
// CHECK-SAME: %x: !ix.tensor<[batch, seq, 64], f32>, %c: !ix.tensor<[batch, 4, ctx + seq, 16], bf16>) {
// CHECK-NEXT: %0 = ix.slice %x {dim = 1 : i64, start = #ix.dim<seq - 1>, end = #ix.dim<seq>} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, 1, 64], f32>
// CHECK-NEXT: %1 = ix.slice %x {dim = 2 : i64, start = #ix.dim<0>, end = #ix.dim<32>} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 32], f32>
// CHECK-NEXT: %2 = ix.slice %x {dim = -1 : i64, start = #ix.dim<1>, end = #ix.dim<64>, step = 2 : i64} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 32], f32>
// CHECK-NEXT: %3 = ix.slice %c {dim = 2 : i64, start = #ix.dim<0>, end = #ix.dim<ctx>} : (!ix.tensor<[batch, 4, ctx + seq, 16], bf16>) -> !ix.tensor<[batch, 4, ctx, 16], bf16>
// CHECK-NEXT: %4 = ix.slice %c {dim = 2 : i64, start = #ix.dim<ctx>, end = #ix.dim<ctx + seq>} : (!ix.tensor<[batch, 4, ctx + seq, 16], bf16>) -> !ix.tensor<[batch, 4, seq, 16], bf16>
// CHECK-NEXT: %5 = ix.slice %x {dim = 1 : i64, start = #ix.dim<0>, end = #ix.dim<seq>, step = 2 : i64} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, (seq + 1) floordiv 2, 64], f32>
// CHECK-NEXT: %6 = ix.slice %x {dim = 1 : i64, start = #ix.dim<seq floordiv 2>, end = #ix.dim<seq floordiv 2>} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, 0, 64], f32>
// CHECK-NEXT: %7 = ix.slice %x {dim = 2 : i64, start = 8 : i64, end = 24 : i64} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 16], f32>
// CHECK-NEXT: %8 = ix.slice %x {dim = 1 : i64, start = #ix.dim<seq floordiv 2>, end = #ix.dim<seq>} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq - (seq floordiv 2), 64], f32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @slices(%x: !ix.tensor<[batch, seq, 64], f32>, %c: !ix.tensor<[batch, 4, ctx + seq, 16], bf16>) {
  %0 = ix.slice %x {dim = 1 : i64, start = #ix.dim<seq - 1>, end = #ix.dim<seq>} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, 1, 64], f32>
  %1 = ix.slice %x {dim = 2 : i64, start = #ix.dim<0>, end = #ix.dim<32>} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 32], f32>
  %2 = ix.slice %x {dim = -1 : i64, start = #ix.dim<1>, end = #ix.dim<64>, step = 2 : i64} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 32], f32>
  %3 = ix.slice %c {dim = 2 : i64, start = #ix.dim<0>, end = #ix.dim<ctx>} : (!ix.tensor<[batch, 4, ctx + seq, 16], bf16>) -> !ix.tensor<[batch, 4, ctx, 16], bf16>
  %4 = ix.slice %c {dim = 2 : i64, start = #ix.dim<ctx>, end = #ix.dim<ctx + seq>} : (!ix.tensor<[batch, 4, ctx + seq, 16], bf16>) -> !ix.tensor<[batch, 4, seq, 16], bf16>
  %5 = ix.slice %x {dim = 1 : i64, start = #ix.dim<0>, end = #ix.dim<seq>, step = 2 : i64} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, (seq + 1) floordiv 2, 64], f32>
  %6 = ix.slice %x {dim = 1 : i64, start = #ix.dim<seq floordiv 2>, end = #ix.dim<seq floordiv 2>} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, 0, 64], f32>
  %7 = ix.slice %x {dim = 2 : i64, start = 8 : i64, end = 24 : i64} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 16], f32>
  %8 = ix.slice %x {dim = 1 : i64, start = #ix.dim<seq floordiv 2>, end = #ix.dim<seq>} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq - seq floordiv 2, 64], f32>
  func.return
}
