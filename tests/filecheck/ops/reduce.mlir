// The reductions (reduce_sum, reduce_mean, reduce_max): dims as array<i64> (negative counts from
// the end, duplicates allowed), dropped from the result unless keepdim is set.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @reductions(
// CHECK-SAME: %x: !ix.tensor<[batch, seq, 64], f32>) {
// CHECK-NEXT: %0 = ix.reduce_sum %x {dims = array<i64: 2>} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq], f32>
// CHECK-NEXT: %1 = ix.reduce_mean %x {dims = array<i64: -1>, keepdim} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 1], f32>
// CHECK-NEXT: %2 = ix.reduce_max %x {dims = array<i64: 0, 1>} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[64], f32>
// CHECK-NEXT: %3 = ix.reduce_sum %x {dims = array<i64: 1, -2>, keepdim} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, 1, 64], f32>
// CHECK-NEXT: %4 = ix.reduce_max %x {dims = array<i64: 0, 1, 2>} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[], f32>
// CHECK-NEXT: %5 = ix.reduce_mean %x {dims = array<i64: 0, 2>, keepdim} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[1, seq, 1], f32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @reductions(%x: !ix.tensor<[batch, seq, 64], f32>) {
  %0 = ix.reduce_sum %x {dims = array<i64: 2>} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq], f32>
  %1 = ix.reduce_mean %x {dims = array<i64: -1>, keepdim} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 1], f32>
  %2 = ix.reduce_max %x {dims = array<i64: 0, 1>} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[64], f32>
  %3 = ix.reduce_sum %x {dims = array<i64: 1, -2>, keepdim} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, 1, 64], f32>
  %4 = ix.reduce_max %x {dims = array<i64: 0, 1, 2>} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[], f32>
  %5 = ix.reduce_mean %x {dims = array<i64: 0, 2>, keepdim} : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[1, seq, 1], f32>
  func.return
}

// CHECK-LABEL: func.func @int_and_symbolic(
// CHECK-SAME: %x: !ix.tensor<[batch * seq, seq + 1], i32>) {
// CHECK-NEXT: %0 = ix.reduce_sum %x {dims = array<i64: 1>} : (!ix.tensor<[batch * seq, seq + 1], i32>) -> !ix.tensor<[batch * seq], i32>
// CHECK-NEXT: %1 = ix.reduce_max %x {dims = array<i64: 0>, keepdim} : (!ix.tensor<[batch * seq, seq + 1], i32>) -> !ix.tensor<[1, seq + 1], i32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @int_and_symbolic(%x: !ix.tensor<[batch * seq, seq + 1], i32>) {
  %0 = ix.reduce_sum %x {dims = array<i64: 1>} : (!ix.tensor<[batch * seq, seq + 1], i32>) -> !ix.tensor<[batch * seq], i32>
  %1 = ix.reduce_max %x {dims = array<i64: 0>, keepdim} : (!ix.tensor<[batch * seq, seq + 1], i32>) -> !ix.tensor<[1, seq + 1], i32>
  func.return
}
