// Broken rules of ix.slice.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @past_the_end(%x: !ix.tensor<[4, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.slice: slice end 96 is past the dim size 64
  %0 = ix.slice %x {dim = 1 : i64, start = #ix.dim<32>, end = #ix.dim<96>} : (!ix.tensor<[4, 64], f32>) -> !ix.tensor<[4, 64], f32>
  func.return
}

// -----

func.func @symbolic_past_the_end(%x: !ix.tensor<[seq, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.slice: slice end seq + 1 is past the dim size seq
  %0 = ix.slice %x {dim = 0 : i64, start = #ix.dim<0>, end = #ix.dim<seq + 1>} : (!ix.tensor<[seq, 64], f32>) -> !ix.tensor<[seq + 1, 64], f32>
  func.return
}

// -----

func.func @end_before_start(%x: !ix.tensor<[4, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.slice: slice end 4 is before start 8
  %0 = ix.slice %x {dim = 1 : i64, start = #ix.dim<8>, end = #ix.dim<4>} : (!ix.tensor<[4, 64], f32>) -> !ix.tensor<[4, 0], f32>
  func.return
}

// -----

func.func @start_maybe_negative(%x: !ix.tensor<[seq, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.slice: slice start seq - 2 is not provably >= 0
  %0 = ix.slice %x {dim = 0 : i64, start = #ix.dim<seq - 2>, end = #ix.dim<seq>} : (!ix.tensor<[seq, 64], f32>) -> !ix.tensor<[2, 64], f32>
  func.return
}

// -----

func.func @zero_step(%x: !ix.tensor<[4, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.slice: slice step must be positive, got 0
  %0 = ix.slice %x {dim = 1 : i64, start = #ix.dim<0>, end = #ix.dim<8>, step = 0 : i64} : (!ix.tensor<[4, 64], f32>) -> !ix.tensor<[4, 8], f32>
  func.return
}

// -----

func.func @missing_end(%x: !ix.tensor<[4, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.slice: missing dim attribute 'end' (#ix.dim<...>)
  %0 = ix.slice %x {dim = 1 : i64, start = #ix.dim<0>} : (!ix.tensor<[4, 64], f32>) -> !ix.tensor<[4, 64], f32>
  func.return
}

// -----

func.func @bound_not_a_dim(%x: !ix.tensor<[4, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.slice: attribute 'start' must be a #ix.dim<...>, got "zero"
  %0 = ix.slice %x {dim = 1 : i64, start = "zero", end = #ix.dim<8>} : (!ix.tensor<[4, 64], f32>) -> !ix.tensor<[4, 8], f32>
  func.return
}

// -----

func.func @dim_out_of_range(%x: !ix.tensor<[4, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.slice: dim 2 is out of range for rank 2
  %0 = ix.slice %x {dim = 2 : i64, start = #ix.dim<0>, end = #ix.dim<8>} : (!ix.tensor<[4, 64], f32>) -> !ix.tensor<[4, 8], f32>
  func.return
}

// -----

func.func @wrong_result(%x: !ix.tensor<[seq, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.slice: result type is [seq, 64] f32 but the operands give [seq - 1, 64] f32
  %0 = ix.slice %x {dim = 0 : i64, start = #ix.dim<1>, end = #ix.dim<seq>} : (!ix.tensor<[seq, 64], f32>) -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @malformed_bound(%x: !ix.tensor<[seq, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:65: error: floordiv takes a positive integer constant
  %0 = ix.slice %x {dim = 0 : i64, start = #ix.dim<seq floordiv -2>, end = #ix.dim<seq>} : (!ix.tensor<[seq, 64], f32>) -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @maybe_past_the_end(%x: !ix.tensor<[seq, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.slice: slice end ctx is not provably <= the dim size seq
  %0 = ix.slice %x {dim = 0 : i64, start = #ix.dim<0>, end = #ix.dim<ctx>} : (!ix.tensor<[seq, 64], f32>) -> !ix.tensor<[ctx, 64], f32>
  func.return
}

// -----

func.func @negative_start(%x: !ix.tensor<[4, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.slice: slice start -1 is negative
  %0 = ix.slice %x {dim = 1 : i64, start = -1 : i64, end = #ix.dim<8>} : (!ix.tensor<[4, 64], f32>) -> !ix.tensor<[4, 9], f32>
  func.return
}

// -----

func.func @scalar_input(%x: !ix.tensor<[], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.slice: cannot slice a rank-0 tensor: input must have rank >= 1
  %0 = ix.slice %x {dim = 0 : i64, start = 0 : i64, end = 1 : i64} : (!ix.tensor<[], f32>) -> !ix.tensor<[], f32>
  func.return
}
