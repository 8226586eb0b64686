// ix.last_token takes each sequence's row at its last real token (the last position that is not -1).
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @last_tokens(
// CHECK-SAME: %h: !ix.tensor<[batch, seq, 576], bf16>, %pos: !ix.tensor<[batch, seq], i32>, %x: !ix.tensor<[2, 7, 8], f32>, %p: !ix.tensor<[2, 7], i64>) {
// CHECK-NEXT: %0 = ix.last_token %h, %pos : (!ix.tensor<[batch, seq, 576], bf16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 1, 576], bf16>
// CHECK-NEXT: %1 = ix.last_token %x, %p : (!ix.tensor<[2, 7, 8], f32>, !ix.tensor<[2, 7], i64>) -> !ix.tensor<[2, 1, 8], f32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @last_tokens(%h: !ix.tensor<[batch, seq, 576], bf16>, %pos: !ix.tensor<[batch, seq], i32>, %x: !ix.tensor<[2, 7, 8], f32>, %p: !ix.tensor<[2, 7], i64>) {
  %0 = ix.last_token %h, %pos : (!ix.tensor<[batch, seq, 576], bf16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 1, 576], bf16>
  %1 = ix.last_token %x, %p : (!ix.tensor<[2, 7, 8], f32>, !ix.tensor<[2, 7], i64>) -> !ix.tensor<[2, 1, 8], f32>
  func.return
}
