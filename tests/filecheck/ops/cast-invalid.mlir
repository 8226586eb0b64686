// Broken rules of ix.cast.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @changes_shape(%x: !ix.tensor<[batch, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.cast: result dim 1 must equal the input's: 64 vs 32
  %0 = ix.cast %x : (!ix.tensor<[batch, 64], f32>) -> !ix.tensor<[batch, 32], f16>
  func.return
}

// -----

func.func @changes_symbolic_dim(%x: !ix.tensor<[seq, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.cast: result dim 0 must equal the input's: seq vs seq + 1
  %0 = ix.cast %x : (!ix.tensor<[seq, 64], f32>) -> !ix.tensor<[seq + 1, 64], f16>
  func.return
}

// -----

func.func @changes_rank(%x: !ix.tensor<[4, 4], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.cast: input and result must have the same rank: 2 vs 1
  %0 = ix.cast %x : (!ix.tensor<[4, 4], f32>) -> !ix.tensor<[16], f16>
  func.return
}
