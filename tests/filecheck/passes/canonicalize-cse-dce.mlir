// The cleanup pipeline canonicalize,cse,dce: its output verifies (inferx opt re-verifies on
// parse), prints and re-parses to the same text, and holds only the live, canonical ops.
// RUN: inferx opt %s -p canonicalize,cse,dce > %t.once
// RUN: inferx opt %t.once > %t.twice
// RUN: diff %t.once %t.twice
// RUN: inferx opt %t.once -p canonicalize,cse,dce | diff %t.once -
// RUN: filecheck %s < %t.once

// CHECK-LABEL: func.func @block
// CHECK-NEXT:    %w = ix.weight {name = "w"} : !ix.tensor<[64, 64], f32>
// CHECK-NEXT:    %n = ix.weight {name = "norm"} : !ix.tensor<[64], f32>
// CHECK-NEXT:    %h = ix.rmsnorm %x, %n {eps = 1.000000e-05 : f64} : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
// CHECK-NEXT:    %y = ix.linear %h, %w : !ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[64, 64], f32> -> !ix.tensor<[batch, seq, 64], f32>
// CHECK-NEXT:    %r = ix.reshape %y : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 4, 16], f32>
// CHECK-NEXT:    %t = ix.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (!ix.tensor<[batch, seq, 4, 16], f32>) -> !ix.tensor<[batch, 4, seq, 16], f32>
// CHECK-NEXT:    %a = ix.attention %t, %t, %t {causal, scale = 2.500000e-01 : f64} : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
// CHECK-NEXT:    %s = ix.constant {value = 1.250000e-01 : f32} : !ix.tensor<[], f32>
// CHECK-NEXT:    %o = ix.mul %a, %s : (!ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[], f32>) -> !ix.tensor<[batch, 4, seq, 16], f32>
// CHECK-NEXT:    %sum = ix.add %o, %o : (!ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>) -> !ix.tensor<[batch, 4, seq, 16], f32>
// CHECK-NEXT:    func.return %sum : !ix.tensor<[batch, 4, seq, 16], f32>
// CHECK-NEXT:  }
func.func @block(%x: !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, 4, seq, 16], f32> {
  %w = ix.weight {name = "w"} : !ix.tensor<[64, 64], f32>
  %n = ix.weight {name = "norm"} : !ix.tensor<[64], f32>
  %one = ix.constant {value = 1.0 : f32} : !ix.tensor<[64], f32>
  %x1 = ix.mul %x, %one : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %h = ix.rmsnorm %x1, %n {eps = 1.0e-05 : f64} : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %y = ix.linear %h, %w : !ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[64, 64], f32> -> !ix.tensor<[batch, seq, 64], f32>
  %y2 = ix.linear %h, %w : !ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[64, 64], f32> -> !ix.tensor<[batch, seq, 64], f32>
  %flat = ix.reshape %y : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch * seq, 64], f32>
  %r = ix.reshape %flat : (!ix.tensor<[batch * seq, 64], f32>) -> !ix.tensor<[batch, seq, 4, 16], f32>
  %t = ix.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (!ix.tensor<[batch, seq, 4, 16], f32>) -> !ix.tensor<[batch, 4, seq, 16], f32>
  %a = ix.attention %t, %t, %t {causal, scale = 0.25 : f64} : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  %half = ix.constant {value = 0.5 : f32} : !ix.tensor<[], f32>
  %quarter = ix.constant {value = 0.25 : f32} : !ix.tensor<[], f32>
  %s = ix.mul %half, %quarter : (!ix.tensor<[], f32>, !ix.tensor<[], f32>) -> !ix.tensor<[], f32>
  %o = ix.mul %a, %s : (!ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[], f32>) -> !ix.tensor<[batch, 4, seq, 16], f32>
  %o2 = ix.mul %a, %s : (!ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[], f32>) -> !ix.tensor<[batch, 4, seq, 16], f32>
  %sum = ix.add %o, %o2 : (!ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>) -> !ix.tensor<[batch, 4, seq, 16], f32>
  %unused = ix.reshape %y2 : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  func.return %sum : !ix.tensor<[batch, 4, seq, 16], f32>
}
