// ix.cast changes the element type and keeps the shape, symbolic dims included.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @casts(
// CHECK-SAME: %x: !ix.tensor<[batch, seq, 64], bf16>, %ids: !ix.tensor<[batch, seq], i64>, %m: !ix.tensor<[seq, seq], bool>) {
// CHECK-NEXT: %0 = ix.cast %x : (!ix.tensor<[batch, seq, 64], bf16>) -> !ix.tensor<[batch, seq, 64], f32>
// CHECK-NEXT: %1 = ix.cast %0 : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f8e4m3>
// CHECK-NEXT: %2 = ix.cast %ids : (!ix.tensor<[batch, seq], i64>) -> !ix.tensor<[batch, seq], i32>
// CHECK-NEXT: %3 = ix.cast %m : (!ix.tensor<[seq, seq], bool>) -> !ix.tensor<[seq, seq], f16>
// CHECK-NEXT: %4 = ix.cast %x : (!ix.tensor<[batch, seq, 64], bf16>) -> !ix.tensor<[batch, seq, 64], bf16>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @casts(%x: !ix.tensor<[batch, seq, 64], bf16>, %ids: !ix.tensor<[batch, seq], i64>, %m: !ix.tensor<[seq, seq], bool>) {
  %0 = ix.cast %x : (!ix.tensor<[batch, seq, 64], bf16>) -> !ix.tensor<[batch, seq, 64], f32>
  %1 = ix.cast %0 : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f8e4m3>
  %2 = ix.cast %ids : (!ix.tensor<[batch, seq], i64>) -> !ix.tensor<[batch, seq], i32>
  %3 = ix.cast %m : (!ix.tensor<[seq, seq], bool>) -> !ix.tensor<[seq, seq], f16>
  %4 = ix.cast %x : (!ix.tensor<[batch, seq, 64], bf16>) -> !ix.tensor<[batch, seq, 64], bf16>
  func.return
}
