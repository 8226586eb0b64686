// The binary elementwise ops (add, sub, mul, div, max, min, pow): NumPy broadcasting over static
// and symbolic dims, a literal 1 stretching, rank extension from the left.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @same_shape(
// CHECK-SAME: %a: !ix.tensor<[batch, seq, 64], f32>, %b: !ix.tensor<[batch, seq, 64], f32>) {
// CHECK-NEXT: %0 = ix.add %a, %b : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
// CHECK-NEXT: %1 = ix.sub %a, %b : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
// CHECK-NEXT: %2 = ix.mul %a, %b : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
// CHECK-NEXT: %3 = ix.div %a, %b : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
// CHECK-NEXT: %4 = ix.max %a, %b : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
// CHECK-NEXT: %5 = ix.min %a, %b : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
// CHECK-NEXT: %6 = ix.pow %a, %b : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @same_shape(%a: !ix.tensor<[batch, seq, 64], f32>, %b: !ix.tensor<[batch, seq, 64], f32>) {
  %0 = ix.add %a, %b : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %1 = ix.sub %a, %b : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %2 = ix.mul %a, %b : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %3 = ix.div %a, %b : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %4 = ix.max %a, %b : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %5 = ix.min %a, %b : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %6 = ix.pow %a, %b : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  func.return
}

// CHECK-LABEL: func.func @broadcast(
// CHECK-SAME: %a: !ix.tensor<[batch, seq, 64], bf16>, %row: !ix.tensor<[64], bf16>, %col: !ix.tensor<[batch, seq, 1], bf16>, %s: !ix.tensor<[], bf16>, %one: !ix.tensor<[1, seq + 1, 1], bf16>, %wide: !ix.tensor<[batch, 1, 8], bf16>) {
// CHECK-NEXT: %0 = ix.add %a, %row : (!ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[64], bf16>) -> !ix.tensor<[batch, seq, 64], bf16>
// CHECK-NEXT: %1 = ix.mul %col, %a : (!ix.tensor<[batch, seq, 1], bf16>, !ix.tensor<[batch, seq, 64], bf16>) -> !ix.tensor<[batch, seq, 64], bf16>
// CHECK-NEXT: %2 = ix.div %a, %s : (!ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[], bf16>) -> !ix.tensor<[batch, seq, 64], bf16>
// CHECK-NEXT: %3 = ix.sub %one, %wide : (!ix.tensor<[1, seq + 1, 1], bf16>, !ix.tensor<[batch, 1, 8], bf16>) -> !ix.tensor<[batch, seq + 1, 8], bf16>
// CHECK-NEXT: %4 = ix.max %row, %col : (!ix.tensor<[64], bf16>, !ix.tensor<[batch, seq, 1], bf16>) -> !ix.tensor<[batch, seq, 64], bf16>
// CHECK-NEXT: %5 = ix.pow %s, %s : (!ix.tensor<[], bf16>, !ix.tensor<[], bf16>) -> !ix.tensor<[], bf16>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @broadcast(%a: !ix.tensor<[batch, seq, 64], bf16>, %row: !ix.tensor<[64], bf16>, %col: !ix.tensor<[batch, seq, 1], bf16>, %s: !ix.tensor<[], bf16>, %one: !ix.tensor<[1, seq + 1, 1], bf16>, %wide: !ix.tensor<[batch, 1, 8], bf16>) {
  %0 = ix.add %a, %row : (!ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[64], bf16>) -> !ix.tensor<[batch, seq, 64], bf16>
  %1 = ix.mul %col, %a : (!ix.tensor<[batch, seq, 1], bf16>, !ix.tensor<[batch, seq, 64], bf16>) -> !ix.tensor<[batch, seq, 64], bf16>
  %2 = ix.div %a, %s : (!ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[], bf16>) -> !ix.tensor<[batch, seq, 64], bf16>
  %3 = ix.sub %one, %wide : (!ix.tensor<[1, seq + 1, 1], bf16>, !ix.tensor<[batch, 1, 8], bf16>) -> !ix.tensor<[batch, seq + 1, 8], bf16>
  %4 = ix.max %row, %col : (!ix.tensor<[64], bf16>, !ix.tensor<[batch, seq, 1], bf16>) -> !ix.tensor<[batch, seq, 64], bf16>
  %5 = ix.pow %s, %s : (!ix.tensor<[], bf16>, !ix.tensor<[], bf16>) -> !ix.tensor<[], bf16>
  func.return
}

// CHECK-LABEL: func.func @int_and_symbolic(
// CHECK-SAME: %a: !ix.tensor<[batch * seq, seq floordiv 2], i32>, %b: !ix.tensor<[batch * seq, 1], i32>) -> !ix.tensor<[batch * seq, seq floordiv 2], i32> {
// CHECK-NEXT: %0 = ix.min %a, %b : (!ix.tensor<[batch * seq, seq floordiv 2], i32>, !ix.tensor<[batch * seq, 1], i32>) -> !ix.tensor<[batch * seq, seq floordiv 2], i32>
// CHECK-NEXT: %1 = ix.add %0, %a : (!ix.tensor<[batch * seq, seq floordiv 2], i32>, !ix.tensor<[batch * seq, seq floordiv 2], i32>) -> !ix.tensor<[batch * seq, seq floordiv 2], i32>
// CHECK-NEXT: func.return %1 : !ix.tensor<[batch * seq, seq floordiv 2], i32>
// CHECK-NEXT: }
func.func @int_and_symbolic(%a: !ix.tensor<[batch * seq, seq floordiv 2], i32>, %b: !ix.tensor<[seq * batch, 1], i32>) -> !ix.tensor<[batch * seq, seq floordiv 2], i32> {
  %0 = ix.min %a, %b : (!ix.tensor<[batch * seq, seq floordiv 2], i32>, !ix.tensor<[seq * batch, 1], i32>) -> !ix.tensor<[batch * seq, seq floordiv 2], i32>
  %1 = ix.add %0, %a : (!ix.tensor<[batch * seq, seq floordiv 2], i32>, !ix.tensor<[batch * seq, seq floordiv 2], i32>) -> !ix.tensor<[batch * seq, seq floordiv 2], i32>
  func.return %1 : !ix.tensor<[batch * seq, seq floordiv 2], i32>
}
