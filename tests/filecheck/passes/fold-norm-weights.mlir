// RUN: inferx opt %s -p fold-norm-weights --split-input-file | filecheck %s

// The norm's scale moves into the weight (a weight-only product); the norm scales by ones.
// CHECK-LABEL: func.func @fold
// CHECK:      %[[G:.*]] = ix.weight {name = "g"} : !ix.tensor<[16], f32>
// CHECK-NEXT: %[[W:.*]] = ix.weight {name = "w"} : !ix.tensor<[8, 16], f32>
// CHECK-NEXT: %[[ONES:.*]] = ix.constant {value = 1.000000e+00 : f32} : !ix.tensor<[16], f32>
// CHECK-NEXT: %[[N:.*]] = ix.rmsnorm %x, %[[ONES]] {eps = 1.000000e-05 : f64}
// CHECK-NEXT: %[[WG:.*]] = ix.mul %[[W]], %[[G]] : (!ix.tensor<[8, 16], f32>, !ix.tensor<[16], f32>) -> !ix.tensor<[8, 16], f32>
// CHECK-NEXT: %[[Y:.*]] = ix.linear %[[N]], %[[WG]]
// CHECK-NEXT: func.return %[[Y]]
func.func @fold(%x: !ix.tensor<[batch, 16], f32>) -> !ix.tensor<[batch, 8], f32> {
  %g = ix.weight {name = "g"} : !ix.tensor<[16], f32>
  %w = ix.weight {name = "w"} : !ix.tensor<[8, 16], f32>
  %n = ix.rmsnorm %x, %g {eps = 1.0e-05 : f64} : (!ix.tensor<[batch, 16], f32>, !ix.tensor<[16], f32>) -> !ix.tensor<[batch, 16], f32>
  %y = ix.linear %n, %w : !ix.tensor<[batch, 16], f32>, !ix.tensor<[8, 16], f32> -> !ix.tensor<[batch, 8], f32>
  func.return %y : !ix.tensor<[batch, 8], f32>
}

// -----

// Negative: a norm that also feeds a non-linear op, and a "kn" weight, keep their scales.
// CHECK-LABEL: func.func @no_fold
// CHECK-NOT:  ix.constant
// CHECK-NOT:  ix.mul
func.func @no_fold(%x: !ix.tensor<[batch, 16], f32>) -> (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 16], f32>, !ix.tensor<[batch, 8], f32>) {
  %g = ix.weight {name = "g"} : !ix.tensor<[16], f32>
  %w = ix.weight {name = "w"} : !ix.tensor<[8, 16], f32>
  %n = ix.rmsnorm %x, %g {eps = 1.0e-05 : f64} : (!ix.tensor<[batch, 16], f32>, !ix.tensor<[16], f32>) -> !ix.tensor<[batch, 16], f32>
  %y = ix.linear %n, %w : !ix.tensor<[batch, 16], f32>, !ix.tensor<[8, 16], f32> -> !ix.tensor<[batch, 8], f32>
  %e = ix.exp %n : (!ix.tensor<[batch, 16], f32>) -> !ix.tensor<[batch, 16], f32>
  %g2 = ix.weight {name = "g2"} : !ix.tensor<[16], f32>
  %wkn = ix.weight {name = "wkn"} : !ix.tensor<[16, 8], f32>
  %n2 = ix.rmsnorm %x, %g2 {eps = 1.0e-05 : f64} : (!ix.tensor<[batch, 16], f32>, !ix.tensor<[16], f32>) -> !ix.tensor<[batch, 16], f32>
  %z = ix.linear %n2, %wkn {w_layout = "kn"} : !ix.tensor<[batch, 16], f32>, !ix.tensor<[16, 8], f32> -> !ix.tensor<[batch, 8], f32>
  func.return %y, %e, %z : !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 16], f32>, !ix.tensor<[batch, 8], f32>
}
