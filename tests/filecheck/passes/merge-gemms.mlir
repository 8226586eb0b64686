// RUN: inferx opt %s -p merge-gemms,dce --split-input-file | filecheck %s

// Three linears of one input become one linear over the concatenated weights, then a split.
// CHECK-LABEL: func.func @qkv
// CHECK:      %[[WQ:.*]] = ix.weight {name = "q"} : !ix.tensor<[8, 16], f32>
// CHECK-NEXT: %[[WK:.*]] = ix.weight {name = "k"} : !ix.tensor<[4, 16], f32>
// CHECK-NEXT: %[[WV:.*]] = ix.weight {name = "v"} : !ix.tensor<[4, 16], f32>
// CHECK-NEXT: %[[W:.*]] = ix.concat %[[WQ]], %[[WK]], %[[WV]] {dim = 0 : i64} : {{.*}} -> !ix.tensor<[16, 16], f32>
// CHECK-NEXT: %[[L:.*]] = ix.linear %x, %[[W]] : !ix.tensor<[batch, 16], f32>, !ix.tensor<[16, 16], f32> -> !ix.tensor<[batch, 16], f32>
// CHECK-NEXT: %[[S:.*]], %[[S1:.*]], %[[S2:.*]] = ix.split %[[L]] {dim = -1 : i64} : (!ix.tensor<[batch, 16], f32>) -> (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>)
// CHECK-NEXT: func.return %[[S]], %[[S1]], %[[S2]]
func.func @qkv(%x: !ix.tensor<[batch, 16], f32>) -> (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>) {
  %wq = ix.weight {name = "q"} : !ix.tensor<[8, 16], f32>
  %q = ix.linear %x, %wq : !ix.tensor<[batch, 16], f32>, !ix.tensor<[8, 16], f32> -> !ix.tensor<[batch, 8], f32>
  %wk = ix.weight {name = "k"} : !ix.tensor<[4, 16], f32>
  %k = ix.linear %x, %wk : !ix.tensor<[batch, 16], f32>, !ix.tensor<[4, 16], f32> -> !ix.tensor<[batch, 4], f32>
  %wv = ix.weight {name = "v"} : !ix.tensor<[4, 16], f32>
  %v = ix.linear %x, %wv : !ix.tensor<[batch, 16], f32>, !ix.tensor<[4, 16], f32> -> !ix.tensor<[batch, 4], f32>
  func.return %q, %k, %v : !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>
}

// -----

// Negative: a "kn" weight, a lone linear, and linears of different inputs are left alone.
// CHECK-LABEL: func.func @no_merge
// CHECK-NOT:  ix.concat
// CHECK-NOT:  ix.split
// CHECK-COUNT-3: ix.linear
// CHECK-NOT:  ix.linear
func.func @no_merge(%x: !ix.tensor<[batch, 16], f32>, %y: !ix.tensor<[batch, 16], f32>) -> (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 8], f32>) {
  %w1 = ix.weight {name = "w1"} : !ix.tensor<[8, 16], f32>
  %a = ix.linear %x, %w1 : !ix.tensor<[batch, 16], f32>, !ix.tensor<[8, 16], f32> -> !ix.tensor<[batch, 8], f32>
  %w2 = ix.weight {name = "w2"} : !ix.tensor<[16, 8], f32>
  %b = ix.linear %x, %w2 {w_layout = "kn"} : !ix.tensor<[batch, 16], f32>, !ix.tensor<[16, 8], f32> -> !ix.tensor<[batch, 8], f32>
  %c = ix.linear %y, %w1 : !ix.tensor<[batch, 16], f32>, !ix.tensor<[8, 16], f32> -> !ix.tensor<[batch, 8], f32>
  func.return %a, %b, %c : !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 8], f32>
}
