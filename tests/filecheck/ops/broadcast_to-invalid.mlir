// Broken rules of ix.broadcast_to.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @not_stretchable(%x: !ix.tensor<[2, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.broadcast_to: cannot broadcast [2, 64] to [4, 64]: dim -2 is 2, needs 1 or 4
  %0 = ix.broadcast_to %x : (!ix.tensor<[2, 64], f32>) -> !ix.tensor<[4, 64], f32>
  func.return
}

// -----

func.func @symbolic_mismatch(%x: !ix.tensor<[seq, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.broadcast_to: cannot broadcast [seq, 64] to [ctx, 64]: dim -2 is seq, needs 1 or ctx
  %0 = ix.broadcast_to %x : (!ix.tensor<[seq, 64], f32>) -> !ix.tensor<[ctx, 64], f32>
  func.return
}

// -----

func.func @lower_rank(%x: !ix.tensor<[batch, seq, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.broadcast_to: cannot broadcast rank 3 [batch, seq, 64] to lower rank 2
  %0 = ix.broadcast_to %x : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @dtype_changes(%x: !ix.tensor<[64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.broadcast_to: input and result must have the same element type: f32 vs bf16
  %0 = ix.broadcast_to %x : (!ix.tensor<[64], f32>) -> !ix.tensor<[4, 64], bf16>
  func.return
}
