// ix.broadcast_to: stretches a literal 1 or adds leading dims to reach the stated shape.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @broadcasts(
// CHECK-SAME: %row: !ix.tensor<[64], f32>, %col: !ix.tensor<[batch, 1, 1], f32>, %s: !ix.tensor<[], i32>, %m: !ix.tensor<[1, 1, seq, seq + 1], bool>) {
// CHECK-NEXT: %0 = ix.broadcast_to %row : (!ix.tensor<[64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
// CHECK-NEXT: %1 = ix.broadcast_to %col : (!ix.tensor<[batch, 1, 1], f32>) -> !ix.tensor<[batch, seq, 64], f32>
// CHECK-NEXT: %2 = ix.broadcast_to %s : (!ix.tensor<[], i32>) -> !ix.tensor<[batch * seq], i32>
// CHECK-NEXT: %3 = ix.broadcast_to %m : (!ix.tensor<[1, 1, seq, seq + 1], bool>) -> !ix.tensor<[batch, 4, seq, seq + 1], bool>
// CHECK-NEXT: %4 = ix.broadcast_to %row : (!ix.tensor<[64], f32>) -> !ix.tensor<[64], f32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @broadcasts(%row: !ix.tensor<[64], f32>, %col: !ix.tensor<[batch, 1, 1], f32>, %s: !ix.tensor<[], i32>, %m: !ix.tensor<[1, 1, seq, seq + 1], bool>) {
  %0 = ix.broadcast_to %row : (!ix.tensor<[64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %1 = ix.broadcast_to %col : (!ix.tensor<[batch, 1, 1], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %2 = ix.broadcast_to %s : (!ix.tensor<[], i32>) -> !ix.tensor<[batch * seq], i32>
  %3 = ix.broadcast_to %m : (!ix.tensor<[1, 1, seq, seq + 1], bool>) -> !ix.tensor<[batch, 4, seq, seq + 1], bool>
  %4 = ix.broadcast_to %row : (!ix.tensor<[64], f32>) -> !ix.tensor<[64], f32>
  func.return
}
