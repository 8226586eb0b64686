// Broken rules of ix.qlinear.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @group_not_allowed(%x: !ix.tensor<[batch, 64], f32>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], f32>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.qlinear: group must be one of 32, 64, 128, got 48
  %0 = ix.qlinear %x, %c, %s {group = 48} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], f32> -> !ix.tensor<[batch, 16], f32>
  func.return
}

// -----

func.func @group_not_dividing(%x: !ix.tensor<[batch, 64], f32>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 1], f32>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.qlinear: the group 128 must divide the codes' K, got 64
  %0 = ix.qlinear %x, %c, %s {group = 128} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 1], f32> -> !ix.tensor<[batch, 16], f32>
  func.return
}

// -----

func.func @codes_not_i4(%x: !ix.tensor<[batch, 64], f32>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i8>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], f32>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.qlinear: codes must be i4, got i8
  %0 = ix.qlinear %x, %c, %s {group = 32} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[16, 64], i8>, !ix.tensor<[16, 2], f32> -> !ix.tensor<[batch, 16], f32>
  func.return
}

// -----

func.func @k_mismatch(%x: !ix.tensor<[batch, 64], f32>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 32], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 1], f32>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.qlinear: input's last dim must equal the codes' K: 64 vs 32
  %0 = ix.qlinear %x, %c, %s {group = 32} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[16, 32], i4>, !ix.tensor<[16, 1], f32> -> !ix.tensor<[batch, 16], f32>
  func.return
}

// -----

func.func @scales_columns(%x: !ix.tensor<[batch, 64], f32>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 4], f32>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.qlinear: scales must have K / group = 2 columns
  %0 = ix.qlinear %x, %c, %s {group = 32} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 4], f32> -> !ix.tensor<[batch, 16], f32>
  func.return
}

// -----

func.func @mins_type(%x: !ix.tensor<[batch, 64], f32>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], f32>
  %m = ix.weight {name = "m"} : !ix.tensor<[16, 2], f16>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.qlinear: mins must have the scales' type
  %0 = ix.qlinear %x, %c, %s mins %m {group = 32} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], f32> mins !ix.tensor<[16, 2], f16> -> !ix.tensor<[batch, 16], f32>
  func.return
}

// -----

func.func @col_scale_length(%x: !ix.tensor<[batch, 64], f32>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], f32>
  %k = ix.weight {name = "k"} : !ix.tensor<[32], f32>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.qlinear: col_scale's length must equal K: 32 vs 64
  %0 = ix.qlinear %x, %c, %s col_scale %k {group = 32} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], f32> col_scale !ix.tensor<[32], f32> -> !ix.tensor<[batch, 16], f32>
  func.return
}

// -----

func.func @no_group(%x: !ix.tensor<[batch, 64], f32>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], f32>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.qlinear: missing integer attribute 'group'
  %0 = ix.qlinear %x, %c, %s : !ix.tensor<[batch, 64], f32>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], f32> -> !ix.tensor<[batch, 16], f32>
  func.return
}

// -----

func.func @bias_not_n(%x: !ix.tensor<[batch, 64], f32>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "s"} : !ix.tensor<[16, 2], f32>
  %b = ix.weight {name = "b"} : !ix.tensor<[8], f32>
  // CHECK: :[[# @LINE + 1]]:3: error: ix.qlinear: bias's length must equal the codes' N: 8 vs 16
  %0 = ix.qlinear %x, %c, %s bias %b {group = 32} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], f32> bias !ix.tensor<[8], f32> -> !ix.tensor<[batch, 16], f32>
  func.return
}
