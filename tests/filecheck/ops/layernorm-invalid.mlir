// Broken rules of ix.layernorm.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @missing_eps(%x: !ix.tensor<[seq, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.layernorm: missing float attribute 'eps'
  %0 = ix.layernorm %x : !ix.tensor<[seq, 64], f32> -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @negative_eps(%x: !ix.tensor<[seq, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.layernorm: eps must be positive
  %0 = ix.layernorm %x {eps = -1.0e-05 : f64} : !ix.tensor<[seq, 64], f32> -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @weight_length(%x: !ix.tensor<[seq, 64], f32>, %w: !ix.tensor<[32], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.layernorm: weight length must equal the input's last dim: 32 vs 64
  %0 = ix.layernorm %x weight %w {eps = 1.0e-05 : f64} : !ix.tensor<[seq, 64], f32> weight !ix.tensor<[32], f32> -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @bias_length(%x: !ix.tensor<[seq, 64], f32>, %w: !ix.tensor<[64], f32>, %b: !ix.tensor<[63], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.layernorm: bias length must equal the input's last dim: 63 vs 64
  %0 = ix.layernorm %x weight %w bias %b {eps = 1.0e-05 : f64} : !ix.tensor<[seq, 64], f32> weight !ix.tensor<[64], f32> bias !ix.tensor<[63], f32> -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @bias_rank(%x: !ix.tensor<[seq, 64], f32>, %b: !ix.tensor<[1, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.layernorm: bias must have rank 1 [hidden], got [1, 64] f32
  %0 = ix.layernorm %x bias %b {eps = 1.0e-05 : f64} : !ix.tensor<[seq, 64], f32> bias !ix.tensor<[1, 64], f32> -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @weight_dtype(%x: !ix.tensor<[seq, 64], f32>, %w: !ix.tensor<[64], f16>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.layernorm: input and weight must have the same element type: f32 vs f16
  %0 = ix.layernorm %x weight %w {eps = 1.0e-05 : f64} : !ix.tensor<[seq, 64], f32> weight !ix.tensor<[64], f16> -> !ix.tensor<[seq, 64], f32>
  func.return
}

// -----

func.func @int_input(%x: !ix.tensor<[seq, 64], i8>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.layernorm: input must be a float tensor, got i8
  %0 = ix.layernorm %x {eps = 1.0e-05 : f64} : !ix.tensor<[seq, 64], i8> -> !ix.tensor<[seq, 64], i8>
  func.return
}

// -----

func.func @wrong_result(%x: !ix.tensor<[seq, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.layernorm: result type is [seq, 64] bf16 but the operands give [seq, 64] f32
  %0 = ix.layernorm %x {eps = 1.0e-05 : f64} : !ix.tensor<[seq, 64], f32> -> !ix.tensor<[seq, 64], bf16>
  func.return
}

// -----

func.func @scalar_input(%x: !ix.tensor<[], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.layernorm: input must have rank >= 1 (it is normalized over its last dim)
  %0 = ix.layernorm %x {eps = 1.0e-05 : f64} : !ix.tensor<[], f32> -> !ix.tensor<[], f32>
  func.return
}
