// Broken rules of ix.transpose.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @missing_perm(%x: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.transpose: missing attribute 'perm' (array<i64: ...>)
  %0 = ix.transpose %x : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[8, 4], f32>
  func.return
}

// -----

func.func @repeated_dim(%x: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.transpose: perm [0, 0] is not a permutation of 0..1
  %0 = ix.transpose %x {perm = array<i64: 0, 0>} : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[4, 4], f32>
  func.return
}

// -----

func.func @perm_too_short(%x: !ix.tensor<[2, 4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.transpose: perm [1, 0] is not a permutation of 0..2
  %0 = ix.transpose %x {perm = array<i64: 1, 0>} : (!ix.tensor<[2, 4, 8], f32>) -> !ix.tensor<[4, 2, 8], f32>
  func.return
}

// -----

func.func @perm_out_of_range(%x: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.transpose: perm [1, 2] is not a permutation of 0..1
  %0 = ix.transpose %x {perm = array<i64: 1, 2>} : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[8, 4], f32>
  func.return
}

// -----

func.func @perm_not_array(%x: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.transpose: attribute 'perm' must be array<i64: ...>, got [1 : i64, 0 : i64]
  %0 = ix.transpose %x {perm = [1, 0]} : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[8, 4], f32>
  func.return
}

// -----

func.func @wrong_result(%x: !ix.tensor<[batch, seq], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.transpose: result type is [batch, seq] f32 but the operands give [seq, batch] f32
  %0 = ix.transpose %x {perm = array<i64: 1, 0>} : (!ix.tensor<[batch, seq], f32>) -> !ix.tensor<[batch, seq], f32>
  func.return
}
