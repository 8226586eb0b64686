// Broken rules of ix.dequantize and of ix.qlinear's dense operand.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @too_small() {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], bf16>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.dequantize: dense must hold N x K = 1024 elements, got 512
  %0 = ix.dequantize %c, %s {group = 32, min_rows = 1, rows = #ix.dim<seq>} : !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> -> !ix.tensor<[512], bf16>
  func.return
}

// -----

func.func @into_other_type() {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], bf16>
  %b = ix.weight {name = "b"} : !ix.tensor<[2048], f16>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.dequantize: into must have the result's type [2048] bf16, got [2048] f16
  %0 = ix.dequantize %c, %s into %b {group = 32, min_rows = 1, rows = #ix.dim<seq>} : !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> into !ix.tensor<[2048], f16> -> !ix.tensor<[2048], bf16>
  func.return
}

// -----

func.func @norm_weight_length() {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], bf16>
  %g = ix.weight {name = "g"} : !ix.tensor<[32], bf16>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.dequantize: norm_weight's length must equal K
  %0 = ix.dequantize %c, %s norm_weight %g {group = 32, min_rows = 1, rows = #ix.dim<seq>} : !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> norm_weight !ix.tensor<[32], bf16> -> !ix.tensor<[1024], bf16>
  func.return
}

// -----

func.func @no_min_rows() {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], bf16>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.dequantize: min_rows must be at least 1, got 0
  %0 = ix.dequantize %c, %s {group = 32, min_rows = 0, rows = #ix.dim<seq>} : !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> -> !ix.tensor<[1024], bf16>
  func.return
}

// -----

func.func @rows_not_a_dim() {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], bf16>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.dequantize: rows must be a dim (#ix.dim<...>): the reading GEMM's rows
  %0 = ix.dequantize %c, %s {group = 32, min_rows = 1, rows = 5} : !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> -> !ix.tensor<[1024], bf16>
  func.return
}

// -----

func.func @dense_dtype(%x: !ix.tensor<[seq, 64], bf16>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], bf16>
  %d = ix.weight {name = "d"} : !ix.tensor<[1024], f16>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.qlinear: dense must be bf16, got f16
  %0 = ix.qlinear %x, %c, %s dense %d {group = 32} : !ix.tensor<[seq, 64], bf16>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], bf16> dense !ix.tensor<[1024], f16> -> !ix.tensor<[seq, 16], bf16>
  func.return
}
