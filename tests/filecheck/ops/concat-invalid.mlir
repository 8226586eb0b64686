// Broken rules of ix.concat.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @missing_dim(%a: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.concat: missing integer attribute 'dim'
  %0 = ix.concat %a, %a : (!ix.tensor<[4, 8], f32>, !ix.tensor<[4, 8], f32>) -> !ix.tensor<[8, 8], f32>
  func.return
}

// -----

func.func @no_inputs() {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.concat: needs at least one input
  %0 = ix.concat {dim = 0 : i64} : () -> !ix.tensor<[4], f32>
  func.return
}

// -----

func.func @dim_out_of_range(%a: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.concat: dim 2 is out of range for rank 2
  %0 = ix.concat %a, %a {dim = 2 : i64} : (!ix.tensor<[4, 8], f32>, !ix.tensor<[4, 8], f32>) -> !ix.tensor<[4, 16], f32>
  func.return
}

// -----

func.func @other_dim_differs(%a: !ix.tensor<[batch, 8], f32>, %b: !ix.tensor<[seq, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.concat: input #1 dim 0 must match input #0 outside the concat dim: batch vs seq
  %0 = ix.concat %a, %b {dim = 1 : i64} : (!ix.tensor<[batch, 8], f32>, !ix.tensor<[seq, 8], f32>) -> !ix.tensor<[batch, 16], f32>
  func.return
}

// -----

func.func @rank_differs(%a: !ix.tensor<[4, 8], f32>, %b: !ix.tensor<[8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.concat: input #1 has rank 1, input #0 has 2
  %0 = ix.concat %a, %b {dim = 1 : i64} : (!ix.tensor<[4, 8], f32>, !ix.tensor<[8], f32>) -> !ix.tensor<[4, 16], f32>
  func.return
}

// -----

func.func @dtype_differs(%a: !ix.tensor<[4, 8], f32>, %b: !ix.tensor<[4, 8], bf16>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.concat: input #0 and input #1 must have the same element type: f32 vs bf16
  %0 = ix.concat %a, %b {dim = 1 : i64} : (!ix.tensor<[4, 8], f32>, !ix.tensor<[4, 8], bf16>) -> !ix.tensor<[4, 16], f32>
  func.return
}

// -----

func.func @wrong_total(%a: !ix.tensor<[ctx, 8], f32>, %b: !ix.tensor<[seq, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.concat: result type is [ctx + seq + 1, 8] f32 but the operands give [ctx + seq, 8] f32
  %0 = ix.concat %a, %b {dim = 0 : i64} : (!ix.tensor<[ctx, 8], f32>, !ix.tensor<[seq, 8], f32>) -> !ix.tensor<[ctx + seq + 1, 8], f32>
  func.return
}

// -----

func.func @dim_not_int(%a: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.concat: attribute 'dim' must be an integer, got "rows"
  %0 = ix.concat %a, %a {dim = "rows"} : (!ix.tensor<[4, 8], f32>, !ix.tensor<[4, 8], f32>) -> !ix.tensor<[8, 8], f32>
  func.return
}

// -----

func.func @scalar_inputs(%x: !ix.tensor<[], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.concat: cannot concat rank-0 tensors: inputs must have rank >= 1
  %0 = ix.concat %x, %x {dim = 0 : i64} : (!ix.tensor<[], f32>, !ix.tensor<[], f32>) -> !ix.tensor<[2], f32>
  func.return
}
