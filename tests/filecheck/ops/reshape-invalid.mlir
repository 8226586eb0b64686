// Broken rules of ix.reshape.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @changes_count(%x: !ix.tensor<[4, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.reshape: input and result must have the same element count: 64 vs 32
  %0 = ix.reshape %x : (!ix.tensor<[4, 16], f32>) -> !ix.tensor<[4, 4, 2], f32>
  func.return
}

// -----

func.func @changes_symbolic_count(%x: !ix.tensor<[batch, seq, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.reshape: input and result must have the same element count: 64 * batch * seq vs 64 * batch * seq + 64 * batch
  %0 = ix.reshape %x : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq + 1, 64], f32>
  func.return
}

// -----

func.func @drops_a_symbol(%x: !ix.tensor<[batch, seq, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.reshape: input and result must have the same element count: 64 * batch * seq vs 64 * seq
  %0 = ix.reshape %x : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @changes_dtype(%x: !ix.tensor<[4, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.reshape: input and result must have the same element type: f32 vs f16
  %0 = ix.reshape %x : (!ix.tensor<[4, 16], f32>) -> !ix.tensor<[64], f16>
  func.return
}
