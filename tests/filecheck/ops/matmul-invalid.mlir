// Broken rules of ix.matmul.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @k_mismatch(%a: !ix.tensor<[seq, 64], f32>, %b: !ix.tensor<[32, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.matmul: lhs's K (last dim) must equal rhs's K (dim -2): 64 vs 32
  %0 = ix.matmul %a, %b : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[32, 8], f32>) -> !ix.tensor<[seq, 8], f32>
  func.return
}

// -----

func.func @rank_one(%a: !ix.tensor<[64], f32>, %b: !ix.tensor<[64, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.matmul: both operands need rank >= 2, got [64] f32 and [64, 8] f32
  %0 = ix.matmul %a, %b : (!ix.tensor<[64], f32>, !ix.tensor<[64, 8], f32>) -> !ix.tensor<[8], f32>
  func.return
}

// -----

func.func @batch_not_broadcastable(%a: !ix.tensor<[2, seq, 64], f32>, %b: !ix.tensor<[3, 64, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.matmul: the batch dims (all but the last two) must broadcast: shapes [2] and [3] do not broadcast: dim -1 is 2 vs 3
  %0 = ix.matmul %a, %b : (!ix.tensor<[2, seq, 64], f32>, !ix.tensor<[3, 64, 8], f32>) -> !ix.tensor<[2, seq, 8], f32>
  func.return
}

// -----

func.func @dtype_mismatch(%a: !ix.tensor<[4, 64], f32>, %b: !ix.tensor<[64, 8], f16>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.matmul: lhs and rhs must have the same element type: f32 vs f16
  %0 = ix.matmul %a, %b : (!ix.tensor<[4, 64], f32>, !ix.tensor<[64, 8], f16>) -> !ix.tensor<[4, 8], f32>
  func.return
}

// -----

func.func @int_operands(%a: !ix.tensor<[4, 64], i32>, %b: !ix.tensor<[64, 8], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.matmul: lhs must be a float tensor, got i32
  %0 = ix.matmul %a, %b : (!ix.tensor<[4, 64], i32>, !ix.tensor<[64, 8], i32>) -> !ix.tensor<[4, 8], i32>
  func.return
}

// -----

func.func @wrong_result(%a: !ix.tensor<[seq, 64], f32>, %b: !ix.tensor<[64, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.matmul: result type is [8, seq] f32 but the operands give [seq, 8] f32
  %0 = ix.matmul %a, %b : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[64, 8], f32>) -> !ix.tensor<[8, seq], f32>
  func.return
}
