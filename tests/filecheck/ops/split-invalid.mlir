// Broken rules of ix.split.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @sizes_do_not_add_up(%x: !ix.tensor<[4, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.split: split sizes along dim 1 must add up to the input's: 48 vs 64
  %0:2 = ix.split %x {dim = 1 : i64} : (!ix.tensor<[4, 64], f32>) -> (!ix.tensor<[4, 32], f32>, !ix.tensor<[4, 16], f32>)
  func.return
}

// -----

func.func @symbolic_sizes_do_not_add_up(%x: !ix.tensor<[ctx + seq, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.split: split sizes along dim 0 must add up to the input's: 2 * ctx vs ctx + seq
  %0:2 = ix.split %x {dim = 0 : i64} : (!ix.tensor<[ctx + seq, 8], f32>) -> (!ix.tensor<[ctx, 8], f32>, !ix.tensor<[ctx, 8], f32>)
  func.return
}

// -----

func.func @other_dim_differs(%x: !ix.tensor<[4, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.split: result #1 dim 0 must match the input outside the split dim: 4 vs 2
  %0:2 = ix.split %x {dim = 1 : i64} : (!ix.tensor<[4, 64], f32>) -> (!ix.tensor<[4, 32], f32>, !ix.tensor<[2, 32], f32>)
  func.return
}

// -----

func.func @rank_differs(%x: !ix.tensor<[4, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.split: result #1 has rank 1, input has 2
  %0:2 = ix.split %x {dim = 1 : i64} : (!ix.tensor<[4, 64], f32>) -> (!ix.tensor<[4, 32], f32>, !ix.tensor<[128], f32>)
  func.return
}

// -----

func.func @dtype_differs(%x: !ix.tensor<[4, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.split: input and result #1 must have the same element type: f32 vs f16
  %0:2 = ix.split %x {dim = 1 : i64} : (!ix.tensor<[4, 64], f32>) -> (!ix.tensor<[4, 32], f32>, !ix.tensor<[4, 32], f16>)
  func.return
}

// -----

func.func @missing_dim(%x: !ix.tensor<[4, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.split: missing integer attribute 'dim'
  %0:2 = ix.split %x : (!ix.tensor<[4, 64], f32>) -> (!ix.tensor<[4, 32], f32>, !ix.tensor<[4, 32], f32>)
  func.return
}

// -----

func.func @dim_out_of_range(%x: !ix.tensor<[4, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.split: dim -3 is out of range for rank 2
  %0:2 = ix.split %x {dim = -3 : i64} : (!ix.tensor<[4, 64], f32>) -> (!ix.tensor<[2, 64], f32>, !ix.tensor<[2, 64], f32>)
  func.return
}

// -----

func.func @no_results(%x: !ix.tensor<[4, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.split: needs at least one stated result
  ix.split %x {dim = 0 : i64} : (!ix.tensor<[4, 64], f32>) -> ()
  func.return
}

// -----

func.func @scalar_input(%x: !ix.tensor<[], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.split: cannot split a rank-0 tensor: input must have rank >= 1
  %0 = ix.split %x {dim = 0 : i64} : (!ix.tensor<[], f32>) -> !ix.tensor<[], f32>
  func.return
}
