// ix.transpose: result dim i is input dim perm[i].
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @transposes(
// CHECK-SAME: %x: !ix.tensor<[batch, seq, 4, 16], f32>, %m: !ix.tensor<[seq + 1, ctx], i64>, %v: !ix.tensor<[8], f32>) {
// CHECK-NEXT: %0 = ix.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (!ix.tensor<[batch, seq, 4, 16], f32>) -> !ix.tensor<[batch, 4, seq, 16], f32>
// CHECK-NEXT: %1 = ix.transpose %x {perm = array<i64: 3, 2, 1, 0>} : (!ix.tensor<[batch, seq, 4, 16], f32>) -> !ix.tensor<[16, 4, seq, batch], f32>
// CHECK-NEXT: %2 = ix.transpose %x {perm = array<i64: 0, 1, 2, 3>} : (!ix.tensor<[batch, seq, 4, 16], f32>) -> !ix.tensor<[batch, seq, 4, 16], f32>
// CHECK-NEXT: %3 = ix.transpose %m {perm = array<i64: 1, 0>} : (!ix.tensor<[seq + 1, ctx], i64>) -> !ix.tensor<[ctx, seq + 1], i64>
// CHECK-NEXT: %4 = ix.transpose %v {perm = array<i64: 0>} : (!ix.tensor<[8], f32>) -> !ix.tensor<[8], f32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @transposes(%x: !ix.tensor<[batch, seq, 4, 16], f32>, %m: !ix.tensor<[seq + 1, ctx], i64>, %v: !ix.tensor<[8], f32>) {
  %0 = ix.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (!ix.tensor<[batch, seq, 4, 16], f32>) -> !ix.tensor<[batch, 4, seq, 16], f32>
  %1 = ix.transpose %x {perm = array<i64: 3, 2, 1, 0>} : (!ix.tensor<[batch, seq, 4, 16], f32>) -> !ix.tensor<[16, 4, seq, batch], f32>
  %2 = ix.transpose %x {perm = array<i64: 0, 1, 2, 3>} : (!ix.tensor<[batch, seq, 4, 16], f32>) -> !ix.tensor<[batch, seq, 4, 16], f32>
  %3 = ix.transpose %m {perm = array<i64: 1, 0>} : (!ix.tensor<[seq + 1, ctx], i64>) -> !ix.tensor<[ctx, seq + 1], i64>
  %4 = ix.transpose %v {perm = array<i64: 0>} : (!ix.tensor<[8], f32>) -> !ix.tensor<[8], f32>
  func.return
}
