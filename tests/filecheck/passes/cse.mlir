// cse: ops with the same name, operands, attributes and result types merge into the first.
// RUN: inferx opt %s -p cse --split-input-file | filecheck %s

// CHECK-LABEL: func.func @merge
// CHECK-NEXT:    %w = ix.weight {name = "w"} : !ix.tensor<[64, 64], f32>
// CHECK-NEXT:    %c = ix.constant {value = 2.000000e+00 : f32} : !ix.tensor<[64], f32>
// CHECK-NEXT:    %a = ix.linear %x, %w : !ix.tensor<[seq, 64], f32>, !ix.tensor<[64, 64], f32> -> !ix.tensor<[seq, 64], f32>
// CHECK-NEXT:    %m = ix.mul %a, %c : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[seq, 64], f32>
// CHECK-NEXT:    %t = ix.transpose %m {perm = array<i64: 1, 0>} : (!ix.tensor<[seq, 64], f32>) -> !ix.tensor<[64, seq], f32>
// CHECK-NEXT:    %s = ix.add %t, %t : (!ix.tensor<[64, seq], f32>, !ix.tensor<[64, seq], f32>) -> !ix.tensor<[64, seq], f32>
// CHECK-NEXT:    func.return %s : !ix.tensor<[64, seq], f32>
func.func @merge(%x: !ix.tensor<[seq, 64], f32>) -> !ix.tensor<[64, seq], f32> {
  %w = ix.weight {name = "w"} : !ix.tensor<[64, 64], f32>
  %w2 = ix.weight {name = "w"} : !ix.tensor<[64, 64], f32>
  %c = ix.constant {value = 2.0 : f32} : !ix.tensor<[64], f32>
  %c2 = ix.constant {value = 2.0 : f32} : !ix.tensor<[64], f32>
  %a = ix.linear %x, %w : !ix.tensor<[seq, 64], f32>, !ix.tensor<[64, 64], f32> -> !ix.tensor<[seq, 64], f32>
  %b = ix.linear %x, %w2 : !ix.tensor<[seq, 64], f32>, !ix.tensor<[64, 64], f32> -> !ix.tensor<[seq, 64], f32>
  %m = ix.mul %a, %c : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[seq, 64], f32>
  %n = ix.mul %b, %c2 : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[seq, 64], f32>
  %t = ix.transpose %m {perm = array<i64: 1, 0>} : (!ix.tensor<[seq, 64], f32>) -> !ix.tensor<[64, seq], f32>
  %u = ix.transpose %n {perm = array<i64: 1, 0>} : (!ix.tensor<[seq, 64], f32>) -> !ix.tensor<[64, seq], f32>
  %s = ix.add %t, %u : (!ix.tensor<[64, seq], f32>, !ix.tensor<[64, seq], f32>) -> !ix.tensor<[64, seq], f32>
  func.return %s : !ix.tensor<[64, seq], f32>
}

// -----

// No merge: different attributes (weight names, constant values, w_layout, softmax dims), the
// same value at another type, swapped operands of a non-commutative op.
// CHECK-LABEL: func.func @keep
// CHECK-NEXT:    %w = ix.weight {name = "w"} : !ix.tensor<[8, 8], f32>
// CHECK-NEXT:    %v = ix.weight {name = "v"} : !ix.tensor<[8, 8], f32>
// CHECK-NEXT:    %c = ix.constant {value = 1.000000e+00 : f32} : !ix.tensor<[8], f32>
// CHECK-NEXT:    %d = ix.constant {value = 2.000000e+00 : f32} : !ix.tensor<[8], f32>
// CHECK-NEXT:    %e = ix.constant {value = 1.000000e+00 : f32} : !ix.tensor<[1], f32>
// CHECK-NEXT:    %l1 = ix.linear %x, %w : !ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32> -> !ix.tensor<[8, 8], f32>
// CHECK-NEXT:    %l2 = ix.linear %x, %w {w_layout = "kn"} : !ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32> -> !ix.tensor<[8, 8], f32>
// CHECK-NEXT:    %s1 = ix.softmax %x {dim = 0 : i64} : (!ix.tensor<[8, 8], f32>) -> !ix.tensor<[8, 8], f32>
// CHECK-NEXT:    %s2 = ix.softmax %x {dim = 1 : i64} : (!ix.tensor<[8, 8], f32>) -> !ix.tensor<[8, 8], f32>
// CHECK-NEXT:    %d1 = ix.sub %l1, %l2 : (!ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32>) -> !ix.tensor<[8, 8], f32>
// CHECK-NEXT:    %d2 = ix.sub %l2, %l1 : (!ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32>) -> !ix.tensor<[8, 8], f32>
// CHECK-NEXT:    func.return
func.func @keep(%x: !ix.tensor<[8, 8], f32>) -> (!ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32>, !ix.tensor<[8], f32>, !ix.tensor<[8], f32>, !ix.tensor<[1], f32>, !ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32>) {
  %w = ix.weight {name = "w"} : !ix.tensor<[8, 8], f32>
  %v = ix.weight {name = "v"} : !ix.tensor<[8, 8], f32>
  %c = ix.constant {value = 1.0 : f32} : !ix.tensor<[8], f32>
  %d = ix.constant {value = 2.0 : f32} : !ix.tensor<[8], f32>
  %e = ix.constant {value = 1.0 : f32} : !ix.tensor<[1], f32>
  %l1 = ix.linear %x, %w : !ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32> -> !ix.tensor<[8, 8], f32>
  %l2 = ix.linear %x, %w {w_layout = "kn"} : !ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32> -> !ix.tensor<[8, 8], f32>
  %s1 = ix.softmax %x {dim = 0 : i64} : (!ix.tensor<[8, 8], f32>) -> !ix.tensor<[8, 8], f32>
  %s2 = ix.softmax %x {dim = 1 : i64} : (!ix.tensor<[8, 8], f32>) -> !ix.tensor<[8, 8], f32>
  %d1 = ix.sub %l1, %l2 : (!ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32>) -> !ix.tensor<[8, 8], f32>
  %d2 = ix.sub %l2, %l1 : (!ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32>) -> !ix.tensor<[8, 8], f32>
  func.return %w, %v, %c, %d, %e, %s1, %s2, %d1, %d2 : !ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32>, !ix.tensor<[8], f32>, !ix.tensor<[8], f32>, !ix.tensor<[1], f32>, !ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32>, !ix.tensor<[8, 8], f32>
}

// -----

// No merge across functions: each function keeps its own copy.
// CHECK-LABEL: func.func @first
// CHECK-NEXT:    %a = ix.exp %x
// CHECK-LABEL: func.func @second
// CHECK-NEXT:    %a = ix.exp %x
func.func @first(%x: !ix.tensor<[4], f32>) -> !ix.tensor<[4], f32> {
  %a = ix.exp %x : (!ix.tensor<[4], f32>) -> !ix.tensor<[4], f32>
  func.return %a : !ix.tensor<[4], f32>
}
func.func @second(%x: !ix.tensor<[4], f32>) -> !ix.tensor<[4], f32> {
  %a = ix.exp %x : (!ix.tensor<[4], f32>) -> !ix.tensor<[4], f32>
  func.return %a : !ix.tensor<[4], f32>
}
