// Broken rules of the reductions.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @missing_dims(%x: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.reduce_sum: missing attribute 'dims' (array<i64: ...>)
  %0 = ix.reduce_sum %x : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[4], f32>
  func.return
}

// -----

func.func @empty_dims(%x: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.reduce_sum: 'dims' must name at least one dim
  %0 = ix.reduce_sum %x {dims = array<i64>} : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[4, 8], f32>
  func.return
}

// -----

func.func @dim_out_of_range(%x: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.reduce_max: dim 2 is out of range for rank 2
  %0 = ix.reduce_max %x {dims = array<i64: 2>} : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[4], f32>
  func.return
}

// -----

func.func @negative_dim_out_of_range(%x: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.reduce_max: dim -3 is out of range for rank 2
  %0 = ix.reduce_max %x {dims = array<i64: -3>} : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[4], f32>
  func.return
}

// -----

func.func @dims_wrong_type(%x: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.reduce_sum: attribute 'dims' must be array<i64: ...>, got array<i32: 1>
  %0 = ix.reduce_sum %x {dims = array<i32: 1>} : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[4], f32>
  func.return
}

// -----

func.func @mean_of_int(%x: !ix.tensor<[4, 8], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.reduce_mean: input must be a float tensor, got i32
  %0 = ix.reduce_mean %x {dims = array<i64: 1>} : (!ix.tensor<[4, 8], i32>) -> !ix.tensor<[4], i32>
  func.return
}

// -----

func.func @keepdim_not_unit(%x: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.reduce_mean: attribute 'keepdim' is a flag (unit attribute), got true
  %0 = ix.reduce_mean %x {dims = array<i64: 1>, keepdim = true} : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[4, 1], f32>
  func.return
}

// -----

func.func @result_ignores_keepdim(%x: !ix.tensor<[batch, seq], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.reduce_sum: result type is [batch] f32 but the operands give [batch, 1] f32
  %0 = ix.reduce_sum %x {dims = array<i64: 1>, keepdim} : (!ix.tensor<[batch, seq], f32>) -> !ix.tensor<[batch], f32>
  func.return
}

// -----

func.func @wrong_dim_dropped(%x: !ix.tensor<[batch, seq], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.reduce_max: result type is [batch] f32 but the operands give [seq] f32
  %0 = ix.reduce_max %x {dims = array<i64: 0>} : (!ix.tensor<[batch, seq], f32>) -> !ix.tensor<[batch], f32>
  func.return
}
