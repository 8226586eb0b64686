// dce: ops whose results are never used go; whatever func.return reaches stays.
// RUN: inferx opt %s -p dce --split-input-file | filecheck %s

// A dead chain goes entirely; the live chain and the unused argument stay.
// CHECK-LABEL: func.func @dead_chain
// CHECK-NEXT:    %w = ix.weight {name = "w"} : !ix.tensor<[16, 8], f32>
// CHECK-NEXT:    %y = ix.linear %x, %w : !ix.tensor<[seq, 8], f32>, !ix.tensor<[16, 8], f32> -> !ix.tensor<[seq, 16], f32>
// CHECK-NEXT:    %r = ix.silu %y : (!ix.tensor<[seq, 16], f32>) -> !ix.tensor<[seq, 16], f32>
// CHECK-NEXT:    func.return %r : !ix.tensor<[seq, 16], f32>
// CHECK-NEXT:  }
func.func @dead_chain(%x: !ix.tensor<[seq, 8], f32>, %unused: !ix.tensor<[seq], i32>) -> !ix.tensor<[seq, 16], f32> {
  %w = ix.weight {name = "w"} : !ix.tensor<[16, 8], f32>
  %dead_w = ix.weight {name = "dead"} : !ix.tensor<[8], f32>
  %c = ix.constant {value = 1.0 : f32} : !ix.tensor<[8], f32>
  %y = ix.linear %x, %w : !ix.tensor<[seq, 8], f32>, !ix.tensor<[16, 8], f32> -> !ix.tensor<[seq, 16], f32>
  %d1 = ix.mul %x, %c : (!ix.tensor<[seq, 8], f32>, !ix.tensor<[8], f32>) -> !ix.tensor<[seq, 8], f32>
  %d2 = ix.add %d1, %dead_w : (!ix.tensor<[seq, 8], f32>, !ix.tensor<[8], f32>) -> !ix.tensor<[seq, 8], f32>
  %d3 = ix.reduce_sum %d2 {dims = array<i64: 1>} : (!ix.tensor<[seq, 8], f32>) -> !ix.tensor<[seq], f32>
  %r = ix.silu %y : (!ix.tensor<[seq, 16], f32>) -> !ix.tensor<[seq, 16], f32>
  func.return %r : !ix.tensor<[seq, 16], f32>
}

// -----

// Nothing goes when everything reaches func.return (a multi-result split whose second result
// alone is returned included).
// CHECK-LABEL: func.func @all_live
// CHECK-NEXT:    %e = ix.exp %x : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[4, 8], f32>
// CHECK-NEXT:    %p, %p_1 = ix.split %e {dim = 1 : i64} : (!ix.tensor<[4, 8], f32>) -> (!ix.tensor<[4, 2], f32>, !ix.tensor<[4, 6], f32>)
// CHECK-NEXT:    func.return %e, %p_1 : !ix.tensor<[4, 8], f32>, !ix.tensor<[4, 6], f32>
func.func @all_live(%x: !ix.tensor<[4, 8], f32>) -> (!ix.tensor<[4, 8], f32>, !ix.tensor<[4, 6], f32>) {
  %e = ix.exp %x : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[4, 8], f32>
  %p:2 = ix.split %e {dim = 1 : i64} : (!ix.tensor<[4, 8], f32>) -> (!ix.tensor<[4, 2], f32>, !ix.tensor<[4, 6], f32>)
  func.return %e, %p#1 : !ix.tensor<[4, 8], f32>, !ix.tensor<[4, 6], f32>
}

// -----

// A function that returns nothing keeps nothing but its return.
// CHECK-LABEL: func.func @empty
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }
func.func @empty(%x: !ix.tensor<[4], f32>) {
  %a = ix.neg %x : (!ix.tensor<[4], f32>) -> !ix.tensor<[4], f32>
  func.return
}
