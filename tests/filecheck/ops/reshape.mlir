// ix.reshape: any stated shape whose element count is provably the input's, symbolic included.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @reshapes(
// CHECK-SAME: %x: !ix.tensor<[batch, seq, 64], bf16>, %y: !ix.tensor<[batch * seq, 4, 16], bf16>) {
// CHECK-NEXT: %0 = ix.reshape %x : (!ix.tensor<[batch, seq, 64], bf16>) -> !ix.tensor<[batch, seq, 4, 16], bf16>
// CHECK-NEXT: %1 = ix.reshape %x : (!ix.tensor<[batch, seq, 64], bf16>) -> !ix.tensor<[batch * seq, 64], bf16>
// CHECK-NEXT: %2 = ix.reshape %y : (!ix.tensor<[batch * seq, 4, 16], bf16>) -> !ix.tensor<[seq, batch, 64], bf16>
// CHECK-NEXT: %3 = ix.reshape %x : (!ix.tensor<[batch, seq, 64], bf16>) -> !ix.tensor<[64 * batch * seq], bf16>
// CHECK-NEXT: %4 = ix.reshape %x : (!ix.tensor<[batch, seq, 64], bf16>) -> !ix.tensor<[1, batch, seq, 1, 64], bf16>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @reshapes(%x: !ix.tensor<[batch, seq, 64], bf16>, %y: !ix.tensor<[batch * seq, 4, 16], bf16>) {
  %0 = ix.reshape %x : (!ix.tensor<[batch, seq, 64], bf16>) -> !ix.tensor<[batch, seq, 4, 16], bf16>
  %1 = ix.reshape %x : (!ix.tensor<[batch, seq, 64], bf16>) -> !ix.tensor<[batch * seq, 64], bf16>
  %2 = ix.reshape %y : (!ix.tensor<[batch * seq, 4, 16], bf16>) -> !ix.tensor<[seq, batch, 64], bf16>
  %3 = ix.reshape %x : (!ix.tensor<[batch, seq, 64], bf16>) -> !ix.tensor<[64 * batch * seq], bf16>
  %4 = ix.reshape %x : (!ix.tensor<[batch, seq, 64], bf16>) -> !ix.tensor<[1, batch, seq, 1, 64], bf16>
  func.return
}

// CHECK-LABEL: func.func @scalar_and_offsets(
// CHECK-SAME: %s: !ix.tensor<[1, 1], f32>, %z: !ix.tensor<[seq + 1, 2], i32>) {
// CHECK-NEXT: %0 = ix.reshape %s : (!ix.tensor<[1, 1], f32>) -> !ix.tensor<[], f32>
// CHECK-NEXT: %1 = ix.reshape %z : (!ix.tensor<[seq + 1, 2], i32>) -> !ix.tensor<[2 * seq + 2], i32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @scalar_and_offsets(%s: !ix.tensor<[1, 1], f32>, %z: !ix.tensor<[seq + 1, 2], i32>) {
  %0 = ix.reshape %s : (!ix.tensor<[1, 1], f32>) -> !ix.tensor<[], f32>
  %1 = ix.reshape %z : (!ix.tensor<[seq + 1, 2], i32>) -> !ix.tensor<[2 * seq + 2], i32>
  func.return
}
