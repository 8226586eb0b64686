// RUN: inferx opt %s -p interleave-pairs,dce --split-input-file | filecheck %s

// Gate|up halves that meet elementwise: the weight and bias rows go into pairs (weight-only
// reshape, transpose, reshape) and the halves become step-2 slices.
// CHECK-LABEL: func.func @pairs
// CHECK:      %[[W:.*]] = ix.weight {name = "w"} : !ix.tensor<[8, 16], f32>
// CHECK-NEXT: %[[B:.*]] = ix.weight {name = "b"} : !ix.tensor<[8], f32>
// CHECK-NEXT: %[[W0:.*]] = ix.reshape %[[W]] : (!ix.tensor<[8, 16], f32>) -> !ix.tensor<[2, 4, 16], f32>
// CHECK-NEXT: %[[W1:.*]] = ix.transpose %[[W0]] {perm = array<i64: 1, 0, 2>} : (!ix.tensor<[2, 4, 16], f32>) -> !ix.tensor<[4, 2, 16], f32>
// CHECK-NEXT: %[[W2:.*]] = ix.reshape %[[W1]] : (!ix.tensor<[4, 2, 16], f32>) -> !ix.tensor<[8, 16], f32>
// CHECK-NEXT: %[[B0:.*]] = ix.reshape %[[B]] : (!ix.tensor<[8], f32>) -> !ix.tensor<[2, 4], f32>
// CHECK-NEXT: %[[B1:.*]] = ix.transpose %[[B0]] {perm = array<i64: 1, 0>} : (!ix.tensor<[2, 4], f32>) -> !ix.tensor<[4, 2], f32>
// CHECK-NEXT: %[[B2:.*]] = ix.reshape %[[B1]] : (!ix.tensor<[4, 2], f32>) -> !ix.tensor<[8], f32>
// CHECK-NEXT: %[[Y:.*]] = ix.linear %x, %[[W2]] bias %[[B2]]
// CHECK-NEXT: %[[G:.*]] = ix.slice %[[Y]] {dim = -1 : i64, start = #ix.dim<0>, end = #ix.dim<8>, step = 2 : i64}
// CHECK-NEXT: %[[U:.*]] = ix.slice %[[Y]] {dim = -1 : i64, start = #ix.dim<1>, end = #ix.dim<8>, step = 2 : i64}
// CHECK-NEXT: %[[A:.*]] = ix.silu %[[G]]
// CHECK-NEXT: ix.mul %[[A]], %[[U]]
// CHECK-NOT:  ix.split
func.func @pairs(%x: !ix.tensor<[batch, 16], f32>) -> !ix.tensor<[batch, 4], f32> {
  %w = ix.weight {name = "w"} : !ix.tensor<[8, 16], f32>
  %b = ix.weight {name = "b"} : !ix.tensor<[8], f32>
  %y = ix.linear %x, %w bias %b : !ix.tensor<[batch, 16], f32>, !ix.tensor<[8, 16], f32> bias !ix.tensor<[8], f32> -> !ix.tensor<[batch, 8], f32>
  %g, %u = ix.split %y {dim = -1 : i64} : (!ix.tensor<[batch, 8], f32>) -> (!ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>)
  %a = ix.silu %g : (!ix.tensor<[batch, 4], f32>) -> !ix.tensor<[batch, 4], f32>
  %m = ix.mul %a, %u : (!ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>) -> !ix.tensor<[batch, 4], f32>
  func.return %m : !ix.tensor<[batch, 4], f32>
}

// -----

// Negative: a half read by a layout op (as RoPE or a head split reads it), and halves of
// unequal width, keep the split and the weight.
// CHECK-LABEL: func.func @no_pairs
// CHECK-NOT:  ix.slice
// CHECK-NOT:  ix.transpose %w
// CHECK:      ix.split
// CHECK:      ix.split
func.func @no_pairs(%x: !ix.tensor<[batch, 16], f32>) -> (!ix.tensor<[4, batch], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 2], f32>) {
  %w = ix.weight {name = "w"} : !ix.tensor<[8, 16], f32>
  %y = ix.linear %x, %w : !ix.tensor<[batch, 16], f32>, !ix.tensor<[8, 16], f32> -> !ix.tensor<[batch, 8], f32>
  %g, %u = ix.split %y {dim = -1 : i64} : (!ix.tensor<[batch, 8], f32>) -> (!ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>)
  %t = ix.transpose %g {perm = array<i64: 1, 0>} : (!ix.tensor<[batch, 4], f32>) -> !ix.tensor<[4, batch], f32>
  %e = ix.exp %u : (!ix.tensor<[batch, 4], f32>) -> !ix.tensor<[batch, 4], f32>
  %v = ix.weight {name = "v"} : !ix.tensor<[6, 16], f32>
  %z = ix.linear %x, %v : !ix.tensor<[batch, 16], f32>, !ix.tensor<[6, 16], f32> -> !ix.tensor<[batch, 6], f32>
  %p, %q = ix.split %z {dim = -1 : i64} : (!ix.tensor<[batch, 6], f32>) -> (!ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 2], f32>)
  %r = ix.exp %q : (!ix.tensor<[batch, 2], f32>) -> !ix.tensor<[batch, 2], f32>
  func.return %t, %e, %r : !ix.tensor<[4, batch], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 2], f32>
}
