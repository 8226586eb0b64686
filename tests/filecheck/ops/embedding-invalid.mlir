// Broken rules of ix.embedding.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @float_ids(%t: !ix.tensor<[100, 8], f32>, %ids: !ix.tensor<[batch, seq], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.embedding: ids must be an i32 or i64 tensor, got f32
  %0 = ix.embedding %t, %ids : (!ix.tensor<[100, 8], f32>, !ix.tensor<[batch, seq], f32>) -> !ix.tensor<[batch, seq, 8], f32>
  func.return
}

// -----

func.func @table_rank(%t: !ix.tensor<[100], f32>, %ids: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.embedding: table must have rank 2 [vocab, hidden], got [100] f32
  %0 = ix.embedding %t, %ids : (!ix.tensor<[100], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, seq], f32>
  func.return
}

// -----

func.func @wrong_result(%t: !ix.tensor<[100, 8], f32>, %ids: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.embedding: result type is [batch, seq, 100] f32 but the operands give [batch, seq, 8] f32
  %0 = ix.embedding %t, %ids : (!ix.tensor<[100, 8], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, seq, 100], f32>
  func.return
}

// -----

func.func @wrong_result_dtype(%t: !ix.tensor<[100, 8], bf16>, %ids: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.embedding: result type is [batch, seq, 8] f32 but the operands give [batch, seq, 8] bf16
  %0 = ix.embedding %t, %ids : (!ix.tensor<[100, 8], bf16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, seq, 8], f32>
  func.return
}
