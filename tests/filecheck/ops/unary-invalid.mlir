// Broken rules of the unary elementwise ops.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @exp_int(%x: !ix.tensor<[4], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.exp: input must be a float tensor, got i32
  %0 = ix.exp %x : (!ix.tensor<[4], i32>) -> !ix.tensor<[4], i32>
  func.return
}

// -----

func.func @rsqrt_int(%x: !ix.tensor<[4], i8>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.rsqrt: input must be a float tensor, got i8
  %0 = ix.rsqrt %x : (!ix.tensor<[4], i8>) -> !ix.tensor<[4], i8>
  func.return
}

// -----

func.func @sqrt_bool(%x: !ix.tensor<[4], bool>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.sqrt: input must be a float tensor, got bool
  %0 = ix.sqrt %x : (!ix.tensor<[4], bool>) -> !ix.tensor<[4], bool>
  func.return
}

// -----

func.func @silu_int(%x: !ix.tensor<[4], i64>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.silu: input must be a float tensor, got i64
  %0 = ix.silu %x : (!ix.tensor<[4], i64>) -> !ix.tensor<[4], i64>
  func.return
}

// -----

func.func @sigmoid_int(%x: !ix.tensor<[4], i4>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.sigmoid: input must be a float tensor, got i4
  %0 = ix.sigmoid %x : (!ix.tensor<[4], i4>) -> !ix.tensor<[4], i4>
  func.return
}

// -----

func.func @tanh_wrong_shape(%x: !ix.tensor<[seq], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.tanh: result type is [seq + 1] f32 but the operands give [seq] f32
  %0 = ix.tanh %x : (!ix.tensor<[seq], f32>) -> !ix.tensor<[seq + 1], f32>
  func.return
}

// -----

func.func @neg_wrong_dtype(%x: !ix.tensor<[4], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.neg: result type is [4] bf16 but the operands give [4] f32
  %0 = ix.neg %x : (!ix.tensor<[4], f32>) -> !ix.tensor<[4], bf16>
  func.return
}

// -----

func.func @gelu_bad_approximate(%x: !ix.tensor<[4], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.gelu: attribute 'approximate' must be one of 'none', 'tanh', got "erf"
  %0 = ix.gelu %x {approximate = "erf"} : (!ix.tensor<[4], f32>) -> !ix.tensor<[4], f32>
  func.return
}

// -----

func.func @gelu_approximate_not_string(%x: !ix.tensor<[4], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.gelu: attribute 'approximate' must be one of 'none', 'tanh', got 1 : i64
  %0 = ix.gelu %x {approximate = 1 : i64} : (!ix.tensor<[4], f32>) -> !ix.tensor<[4], f32>
  func.return
}

// -----

func.func @two_operands(%x: !ix.tensor<[4], f32>) {
  // CHECK: :[[# @LINE + 1]]:15: error: Expected 1 operand, but got 2
  %0 = ix.exp %x, %x : (!ix.tensor<[4], f32>, !ix.tensor<[4], f32>) -> !ix.tensor<[4], f32>
  func.return
}

// -----

func.func @neg_bool(%x: !ix.tensor<[4], bool>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.neg: arithmetic on bool tensors is not defined; cast first
  %0 = ix.neg %x : (!ix.tensor<[4], bool>) -> !ix.tensor<[4], bool>
  func.return
}
