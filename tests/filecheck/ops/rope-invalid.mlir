// Broken rules of ix.rope.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @missing_theta(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: missing float attribute 'theta'
  %0 = ix.rope %x, %pos : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @negative_theta(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: theta must be positive
  %0 = ix.rope %x, %pos {theta = -1.0 : f64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @input_rank(%x: !ix.tensor<[batch, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: input must have rank 4 [batch, heads, seq, head_dim], got [batch, seq, 64] f32
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64} : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, seq, 64], f32>
  func.return
}

// -----

func.func @float_positions(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: positions must be an i32 or i64 tensor, got f32
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], f32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @positions_rank(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: positions must have rank 2 [batch, seq], got [seq] i32
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @positions_seq(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq + 1], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: positions' seq must equal the input's: seq + 1 vs seq
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq + 1], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @positions_batch(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[1, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: positions' batch must equal the input's: 1 vs batch
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[1, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @symbolic_head_dim(%x: !ix.tensor<[batch, 4, seq, d], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: head_dim (dim 3 of the input) must be static, got d
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64} : (!ix.tensor<[batch, 4, seq, d], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, d], f32>
  func.return
}

// -----

func.func @odd_rotary_dim(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: rotary_dim 31 must be even and in 2..head_dim (64)
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64, rotary_dim = 31 : i64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @rotary_dim_too_big(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: rotary_dim 128 must be even and in 2..head_dim (64)
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64, rotary_dim = 128 : i64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @bad_style(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: attribute 'style' must be one of 'rotate_half', 'interleaved', got "neox"
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64, style = "neox"} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @bad_scaling(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: attribute 'scaling' must be one of 'none', 'linear', 'dynamic', 'llama3', got "yarn"
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64, scaling = "yarn", factor = 2.0 : f64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @linear_without_factor(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: scaling "linear" needs the attribute 'factor'
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64, scaling = "linear"} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @zero_factor(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: scaling factor must be positive
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64, scaling = "linear", factor = 0.0 : f64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @dynamic_without_original_max(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: scaling "dynamic" needs the attribute 'original_max_position'
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64, scaling = "dynamic", factor = 2.0 : f64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @llama3_freq_factors(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: llama3 scaling needs high_freq_factor > low_freq_factor
  %0 = ix.rope %x, %pos {theta = 5.0e+05 : f64, scaling = "llama3", factor = 8.0 : f64, low_freq_factor = 4.0 : f64, high_freq_factor = 1.0 : f64, original_max_position = 8192 : i64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @llama3_missing_low(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: scaling "llama3" needs the attribute 'low_freq_factor'
  %0 = ix.rope %x, %pos {theta = 5.0e+05 : f64, scaling = "llama3", factor = 8.0 : f64, high_freq_factor = 4.0 : f64, original_max_position = 8192 : i64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @int_input(%x: !ix.tensor<[batch, 4, seq, 64], i32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: input must be a float tensor, got i32
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64} : (!ix.tensor<[batch, 4, seq, 64], i32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], i32>
  func.return
}

// -----

func.func @original_max_not_int(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: attribute 'original_max_position' must be an integer, got 2.048000e+03 : f64
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64, scaling = "dynamic", factor = 2.0 : f64, original_max_position = 2048.0 : f64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}

// -----

func.func @wrong_result(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rope: result type is [batch, seq, 4, 64] f32 but the operands give [batch, 4, seq, 64] f32
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, seq, 4, 64], f32>
  func.return
}
