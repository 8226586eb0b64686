// Broken rules of ix.softmax.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @missing_dim(%x: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.softmax: missing integer attribute 'dim'
  %0 = ix.softmax %x : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[4, 8], f32>
  func.return
}

// -----

func.func @dim_out_of_range(%x: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.softmax: dim 2 is out of range for rank 2
  %0 = ix.softmax %x {dim = 2 : i64} : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[4, 8], f32>
  func.return
}

// -----

func.func @int_input(%x: !ix.tensor<[4, 8], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.softmax: input must be a float tensor, got i32
  %0 = ix.softmax %x {dim = 1 : i64} : (!ix.tensor<[4, 8], i32>) -> !ix.tensor<[4, 8], i32>
  func.return
}

// -----

func.func @wrong_result(%x: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.softmax: result type is [4, 8] f16 but the operands give [4, 8] f32
  %0 = ix.softmax %x {dim = 1 : i64} : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[4, 8], f16>
  func.return
}

// -----

func.func @dim_is_float(%x: !ix.tensor<[4, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.softmax: attribute 'dim' must be an integer, got 1.000000e+00 : f64
  %0 = ix.softmax %x {dim = 1.0 : f64} : (!ix.tensor<[4, 8], f32>) -> !ix.tensor<[4, 8], f32>
  func.return
}
