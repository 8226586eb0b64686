// Broken rules of the binary elementwise ops.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @not_broadcastable(%a: !ix.tensor<[batch, 64], f32>, %b: !ix.tensor<[batch, 32], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.add: shapes [batch, 64] and [batch, 32] do not broadcast: dim -1 is 64 vs 32
  %0 = ix.add %a, %b : (!ix.tensor<[batch, 64], f32>, !ix.tensor<[batch, 32], f32>) -> !ix.tensor<[batch, 64], f32>
  func.return
}

// -----

func.func @symbolic_not_broadcastable(%a: !ix.tensor<[seq, 64], f32>, %b: !ix.tensor<[seq + 1, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.sub: shapes [seq, 64] and [seq + 1, 64] do not broadcast: dim -2 is seq vs seq + 1
  %0 = ix.sub %a, %b : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[seq + 1, 64], f32>) -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @dtype_mismatch(%a: !ix.tensor<[4], f32>, %b: !ix.tensor<[4], f16>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.mul: lhs and rhs must have the same element type: f32 vs f16
  %0 = ix.mul %a, %b : (!ix.tensor<[4], f32>, !ix.tensor<[4], f16>) -> !ix.tensor<[4], f32>
  func.return
}

// -----

func.func @wrong_result_shape(%a: !ix.tensor<[batch, 1], f32>, %b: !ix.tensor<[1, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.div: result type is [batch, 1] f32 but the operands give [batch, 8] f32
  %0 = ix.div %a, %b : (!ix.tensor<[batch, 1], f32>, !ix.tensor<[1, 8], f32>) -> !ix.tensor<[batch, 1], f32>
  func.return
}

// -----

func.func @wrong_result_dtype(%a: !ix.tensor<[4], f32>, %b: !ix.tensor<[4], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.max: result type is [4] f16 but the operands give [4] f32
  %0 = ix.max %a, %b : (!ix.tensor<[4], f32>, !ix.tensor<[4], f32>) -> !ix.tensor<[4], f16>
  func.return
}

// -----

func.func @bool_arith(%a: !ix.tensor<[4], bool>, %b: !ix.tensor<[4], bool>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.min: arithmetic on bool tensors is not defined; cast first
  %0 = ix.min %a, %b : (!ix.tensor<[4], bool>, !ix.tensor<[4], bool>) -> !ix.tensor<[4], bool>
  func.return
}

// -----

func.func @pow_int_base(%a: !ix.tensor<[4], i32>, %b: !ix.tensor<[4], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.pow: pow's base must be a float tensor, got i32
  %0 = ix.pow %a, %b : (!ix.tensor<[4], i32>, !ix.tensor<[4], i32>) -> !ix.tensor<[4], i32>
  func.return
}

// -----

func.func @not_a_tensor(%a: !ix.tensor<[4], f32>, %b: f32) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.add: operands and results must be !ix.tensor values, got f32
  %0 = ix.add %a, %b : (!ix.tensor<[4], f32>, f32) -> !ix.tensor<[4], f32>
  func.return
}
