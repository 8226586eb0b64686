// Broken rules of ix.last_token.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @float_positions(%h: !ix.tensor<[batch, seq, 8], f32>, %pos: !ix.tensor<[batch, seq], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.last_token: positions must be an i32 or i64 tensor, got f32
  %0 = ix.last_token %h, %pos : (!ix.tensor<[batch, seq, 8], f32>, !ix.tensor<[batch, seq], f32>) -> !ix.tensor<[batch, 1, 8], f32>
  func.return
}

// -----

func.func @input_rank(%h: !ix.tensor<[batch, 8], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.last_token: input must have rank 3 [batch, seq, hidden], got [batch, 8] f32
  %0 = ix.last_token %h, %pos : (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 1, 8], f32>
  func.return
}

// -----

func.func @other_seq(%h: !ix.tensor<[batch, seq, 8], f32>, %pos: !ix.tensor<[batch, 5], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.last_token: positions' seq must equal the input's
  %0 = ix.last_token %h, %pos : (!ix.tensor<[batch, seq, 8], f32>, !ix.tensor<[batch, 5], i32>) -> !ix.tensor<[batch, 1, 8], f32>
  func.return
}

// -----

func.func @wrong_result(%h: !ix.tensor<[batch, seq, 8], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.last_token: result type is [batch, seq, 8] f32 but the operands give [batch, 1, 8] f32
  %0 = ix.last_token %h, %pos : (!ix.tensor<[batch, seq, 8], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, seq, 8], f32>
  func.return
}
