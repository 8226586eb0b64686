// Broken rules of ix.linear.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @k_mismatch(%x: !ix.tensor<[batch, seq, 64], f32>, %w: !ix.tensor<[128, 32], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.linear: input's last dim must equal the weight's K (nk layout): 64 vs 32
  %0 = ix.linear %x, %w : !ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[128, 32], f32> -> !ix.tensor<[batch, seq, 128], f32>
  func.return
}

// -----

func.func @k_mismatch_kn(%x: !ix.tensor<[batch, 64], f32>, %w: !ix.tensor<[128, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.linear: input's last dim must equal the weight's K (kn layout): 64 vs 128
  %0 = ix.linear %x, %w {w_layout = "kn"} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[128, 64], f32> -> !ix.tensor<[batch, 64], f32>
  func.return
}

// -----

func.func @bad_layout(%x: !ix.tensor<[batch, 64], f32>, %w: !ix.tensor<[128, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.linear: attribute 'w_layout' must be one of 'nk', 'kn', got "mn"
  %0 = ix.linear %x, %w {w_layout = "mn"} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[128, 64], f32> -> !ix.tensor<[batch, 128], f32>
  func.return
}

// -----

func.func @dtype_mismatch(%x: !ix.tensor<[batch, 64], f32>, %w: !ix.tensor<[128, 64], bf16>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.linear: input and weight must have the same element type: f32 vs bf16
  %0 = ix.linear %x, %w : !ix.tensor<[batch, 64], f32>, !ix.tensor<[128, 64], bf16> -> !ix.tensor<[batch, 128], f32>
  func.return
}

// -----

func.func @int_input(%x: !ix.tensor<[batch, 64], i8>, %w: !ix.tensor<[128, 64], i8>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.linear: input must be a float tensor, got i8
  %0 = ix.linear %x, %w : !ix.tensor<[batch, 64], i8>, !ix.tensor<[128, 64], i8> -> !ix.tensor<[batch, 128], i8>
  func.return
}

// -----

func.func @weight_rank(%x: !ix.tensor<[batch, 64], f32>, %w: !ix.tensor<[2, 128, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.linear: weight must have rank 2 ([N, K] for w_layout nk, [K, N] for kn), got [2, 128, 64] f32
  %0 = ix.linear %x, %w : !ix.tensor<[batch, 64], f32>, !ix.tensor<[2, 128, 64], f32> -> !ix.tensor<[batch, 128], f32>
  func.return
}

// -----

func.func @scalar_input(%x: !ix.tensor<[], f32>, %w: !ix.tensor<[128, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.linear: input must have rank >= 1
  %0 = ix.linear %x, %w : !ix.tensor<[], f32>, !ix.tensor<[128, 64], f32> -> !ix.tensor<[128], f32>
  func.return
}

// -----

func.func @bias_length(%x: !ix.tensor<[batch, 64], f32>, %w: !ix.tensor<[128, 64], f32>, %b: !ix.tensor<[64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.linear: bias length must equal the weight's N: 64 vs 128
  %0 = ix.linear %x, %w bias %b : !ix.tensor<[batch, 64], f32>, !ix.tensor<[128, 64], f32> bias !ix.tensor<[64], f32> -> !ix.tensor<[batch, 128], f32>
  func.return
}

// -----

func.func @bias_rank(%x: !ix.tensor<[batch, 64], f32>, %w: !ix.tensor<[128, 64], f32>, %b: !ix.tensor<[1, 128], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.linear: bias must have rank 1 [N], got [1, 128] f32
  %0 = ix.linear %x, %w bias %b : !ix.tensor<[batch, 64], f32>, !ix.tensor<[128, 64], f32> bias !ix.tensor<[1, 128], f32> -> !ix.tensor<[batch, 128], f32>
  func.return
}

// -----

func.func @bias_dtype(%x: !ix.tensor<[batch, 64], f32>, %w: !ix.tensor<[128, 64], f32>, %b: !ix.tensor<[128], f16>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.linear: input and bias must have the same element type: f32 vs f16
  %0 = ix.linear %x, %w bias %b : !ix.tensor<[batch, 64], f32>, !ix.tensor<[128, 64], f32> bias !ix.tensor<[128], f16> -> !ix.tensor<[batch, 128], f32>
  func.return
}

// -----

func.func @wrong_result(%x: !ix.tensor<[batch, 64], f32>, %w: !ix.tensor<[128, 64], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.linear: result type is [batch, 64] f32 but the operands give [batch, 128] f32
  %0 = ix.linear %x, %w : !ix.tensor<[batch, 64], f32>, !ix.tensor<[128, 64], f32> -> !ix.tensor<[batch, 64], f32>
  func.return
}
