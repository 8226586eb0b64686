// Broken rules of ix.rmsnorm.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @missing_eps(%x: !ix.tensor<[seq, 64], f32>, %w: !ix.tensor<[64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rmsnorm: missing float attribute 'eps'
  %0 = ix.rmsnorm %x, %w : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @zero_eps(%x: !ix.tensor<[seq, 64], f32>, %w: !ix.tensor<[64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rmsnorm: eps must be positive
  %0 = ix.rmsnorm %x, %w {eps = 0.0 : f64} : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @eps_not_a_number(%x: !ix.tensor<[seq, 64], f32>, %w: !ix.tensor<[64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rmsnorm: attribute 'eps' must be a float, got "small"
  %0 = ix.rmsnorm %x, %w {eps = "small"} : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @weight_length(%x: !ix.tensor<[seq, 64], f32>, %w: !ix.tensor<[32], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rmsnorm: weight length must equal the input's last dim: 32 vs 64
  %0 = ix.rmsnorm %x, %w {eps = 1.0e-05 : f64} : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[32], f32>) -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @weight_rank(%x: !ix.tensor<[seq, 64], f32>, %w: !ix.tensor<[1, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rmsnorm: weight must have rank 1 [hidden], got [1, 64] f32
  %0 = ix.rmsnorm %x, %w {eps = 1.0e-05 : f64} : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[1, 64], f32>) -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @weight_dtype(%x: !ix.tensor<[seq, 64], f32>, %w: !ix.tensor<[64], bf16>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rmsnorm: input and weight must have the same element type: f32 vs bf16
  %0 = ix.rmsnorm %x, %w {eps = 1.0e-05 : f64} : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[64], bf16>) -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @int_input(%x: !ix.tensor<[seq, 64], i32>, %w: !ix.tensor<[64], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rmsnorm: input must be a float tensor, got i32
  %0 = ix.rmsnorm %x, %w {eps = 1.0e-05 : f64} : (!ix.tensor<[seq, 64], i32>, !ix.tensor<[64], i32>) -> !ix.tensor<[seq, 64], i32>
  func.return
}

// -----

func.func @wrong_result(%x: !ix.tensor<[seq, 64], f32>, %w: !ix.tensor<[64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rmsnorm: result type is [seq + 1, 64] f32 but the operands give [seq, 64] f32
  %0 = ix.rmsnorm %x, %w {eps = 1.0e-05 : f64} : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[seq + 1, 64], f32>
  func.return
}

// -----

func.func @scalar_input(%x: !ix.tensor<[], f32>, %w: !ix.tensor<[1], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rmsnorm: input must have rank >= 1 (it is normalized over its last dim)
  %0 = ix.rmsnorm %x, %w {eps = 1.0e-05 : f64} : (!ix.tensor<[], f32>, !ix.tensor<[1], f32>) -> !ix.tensor<[], f32>
  func.return
}
