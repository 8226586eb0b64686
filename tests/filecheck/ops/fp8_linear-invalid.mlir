// Broken rules of ix.fp8_linear.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @codes_not_f8(%x: !ix.tensor<[batch, 64], bf16>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i8>
  %s = ix.weight {name = "s"} : !ix.tensor<[16], f32>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.fp8_linear: codes must be f8e4m3, got i8
  %0 = ix.fp8_linear %x, %c, %s : !ix.tensor<[batch, 64], bf16>, !ix.tensor<[16, 64], i8>, !ix.tensor<[16], f32> -> !ix.tensor<[batch, 16], bf16>
  func.return
}

// -----

func.func @scales_not_f32(%x: !ix.tensor<[batch, 64], bf16>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], f8e4m3>
  %s = ix.weight {name = "s"} : !ix.tensor<[16], bf16>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.fp8_linear: scales must be f32, got bf16
  %0 = ix.fp8_linear %x, %c, %s : !ix.tensor<[batch, 64], bf16>, !ix.tensor<[16, 64], f8e4m3>, !ix.tensor<[16], bf16> -> !ix.tensor<[batch, 16], bf16>
  func.return
}

// -----

func.func @scales_not_per_channel(%x: !ix.tensor<[batch, 64], bf16>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], f8e4m3>
  %s = ix.weight {name = "s"} : !ix.tensor<[8], f32>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.fp8_linear: scales' length must equal the codes' N
  %0 = ix.fp8_linear %x, %c, %s : !ix.tensor<[batch, 64], bf16>, !ix.tensor<[16, 64], f8e4m3>, !ix.tensor<[8], f32> -> !ix.tensor<[batch, 16], bf16>
  func.return
}

// -----

func.func @k_mismatch(%x: !ix.tensor<[batch, 32], bf16>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], f8e4m3>
  %s = ix.weight {name = "s"} : !ix.tensor<[16], f32>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.fp8_linear: input's last dim must equal the codes' K
  %0 = ix.fp8_linear %x, %c, %s : !ix.tensor<[batch, 32], bf16>, !ix.tensor<[16, 64], f8e4m3>, !ix.tensor<[16], f32> -> !ix.tensor<[batch, 16], bf16>
  func.return
}

// -----

func.func @result_wrong(%x: !ix.tensor<[batch, 64], bf16>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], f8e4m3>
  %s = ix.weight {name = "s"} : !ix.tensor<[16], f32>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.fp8_linear: result
  %0 = ix.fp8_linear %x, %c, %s : !ix.tensor<[batch, 64], bf16>, !ix.tensor<[16, 64], f8e4m3>, !ix.tensor<[16], f32> -> !ix.tensor<[batch, 8], bf16>
  func.return
}

// -----

func.func @x_scale_not_one_f32(%x: !ix.tensor<[batch, 64], bf16>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], f8e4m3>
  %s = ix.weight {name = "s"} : !ix.tensor<[16], f32>
  %xs = ix.weight {name = "xs"} : !ix.tensor<[64], f32>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.fp8_linear: x_scale must be f32 [1], got
  %0 = ix.fp8_linear %x, %c, %s x_scale %xs : !ix.tensor<[batch, 64], bf16>, !ix.tensor<[16, 64], f8e4m3>, !ix.tensor<[16], f32> x_scale !ix.tensor<[64], f32> -> !ix.tensor<[batch, 16], bf16>
  func.return
}
