// ix.rmsnorm over the last dim with a weight[hidden] and a positive eps.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @rmsnorms(
// CHECK-SAME: %x: !ix.tensor<[batch, seq, 576], bf16>, %y: !ix.tensor<[batch * seq, 576], f32>) {
// CHECK-NEXT: %w = ix.weight {name = "norm"} : !ix.tensor<[576], bf16>
// CHECK-NEXT: %wf = ix.weight {name = "normf"} : !ix.tensor<[576], f32>
// CHECK-NEXT: %0 = ix.rmsnorm %x, %w {eps = 1.000000e-05 : f64} : (!ix.tensor<[batch, seq, 576], bf16>, !ix.tensor<[576], bf16>) -> !ix.tensor<[batch, seq, 576], bf16>
// CHECK-NEXT: %1 = ix.rmsnorm %y, %wf {eps = 1.000000e-06 : f32} : (!ix.tensor<[batch * seq, 576], f32>, !ix.tensor<[576], f32>) -> !ix.tensor<[batch * seq, 576], f32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @rmsnorms(%x: !ix.tensor<[batch, seq, 576], bf16>, %y: !ix.tensor<[batch * seq, 576], f32>) {
  %w = ix.weight {name = "norm"} : !ix.tensor<[576], bf16>
  %wf = ix.weight {name = "normf"} : !ix.tensor<[576], f32>
  %0 = ix.rmsnorm %x, %w {eps = 1.000000e-05 : f64} : (!ix.tensor<[batch, seq, 576], bf16>, !ix.tensor<[576], bf16>) -> !ix.tensor<[batch, seq, 576], bf16>
  %1 = ix.rmsnorm %y, %wf {eps = 1.0e-06 : f32} : (!ix.tensor<[batch * seq, 576], f32>, !ix.tensor<[576], f32>) -> !ix.tensor<[batch * seq, 576], f32>
  func.return
}
