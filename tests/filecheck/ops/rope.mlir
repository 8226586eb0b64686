// ix.rope on x[batch, heads, seq, head_dim] at positions[batch, seq]: each style and scaling,
// with and without rotary_dim.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @styles(
// CHECK-SAME: %x: !ix.tensor<[batch, 4, seq, 64], bf16>, %pos: !ix.tensor<[batch, seq], i32>) {
// CHECK-NEXT: %0 = ix.rope %x, %pos {theta = 1.000000e+04 : f64} : (!ix.tensor<[batch, 4, seq, 64], bf16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], bf16>
// CHECK-NEXT: %1 = ix.rope %x, %pos {theta = 1.000000e+04 : f64, style = "rotate_half"} : (!ix.tensor<[batch, 4, seq, 64], bf16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], bf16>
// CHECK-NEXT: %2 = ix.rope %x, %pos {theta = 1.000000e+04 : f64, style = "interleaved", rotary_dim = 32 : i64} : (!ix.tensor<[batch, 4, seq, 64], bf16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], bf16>
// CHECK-NEXT: %3 = ix.rope %x, %pos {theta = 5.000000e+05 : f64, rotary_dim = 64 : i64} : (!ix.tensor<[batch, 4, seq, 64], bf16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], bf16>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @styles(%x: !ix.tensor<[batch, 4, seq, 64], bf16>, %pos: !ix.tensor<[batch, seq], i32>) {
  %0 = ix.rope %x, %pos {theta = 1.000000e+04 : f64} : (!ix.tensor<[batch, 4, seq, 64], bf16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], bf16>
  %1 = ix.rope %x, %pos {theta = 1.000000e+04 : f64, style = "rotate_half"} : (!ix.tensor<[batch, 4, seq, 64], bf16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], bf16>
  %2 = ix.rope %x, %pos {theta = 1.000000e+04 : f64, style = "interleaved", rotary_dim = 32 : i64} : (!ix.tensor<[batch, 4, seq, 64], bf16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], bf16>
  %3 = ix.rope %x, %pos {theta = 5.000000e+05 : f64, rotary_dim = 64 : i64} : (!ix.tensor<[batch, 4, seq, 64], bf16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], bf16>
  func.return
}

// CHECK-LABEL: func.func @scalings(
// CHECK-SAME: %x: !ix.tensor<[1, 8, seq + 1, 128], f32>, %pos: !ix.tensor<[1, seq + 1], i64>) {
// CHECK-NEXT: %0 = ix.rope %x, %pos {theta = 1.000000e+04 : f64, scaling = "none"} : (!ix.tensor<[1, 8, seq + 1, 128], f32>, !ix.tensor<[1, seq + 1], i64>) -> !ix.tensor<[1, 8, seq + 1, 128], f32>
// CHECK-NEXT: %1 = ix.rope %x, %pos {theta = 1.000000e+04 : f64, scaling = "linear", factor = 2.000000e+00 : f64} : (!ix.tensor<[1, 8, seq + 1, 128], f32>, !ix.tensor<[1, seq + 1], i64>) -> !ix.tensor<[1, 8, seq + 1, 128], f32>
// CHECK-NEXT: %2 = ix.rope %x, %pos {theta = 1.000000e+04 : f64, scaling = "dynamic", factor = 4.000000e+00 : f64, original_max_position = 2048 : i64} : (!ix.tensor<[1, 8, seq + 1, 128], f32>, !ix.tensor<[1, seq + 1], i64>) -> !ix.tensor<[1, 8, seq + 1, 128], f32>
// CHECK-NEXT: %3 = ix.rope %x, %pos {theta = 5.000000e+05 : f64, scaling = "llama3", factor = 8.000000e+00 : f64, low_freq_factor = 1.000000e+00 : f64, high_freq_factor = 4.000000e+00 : f64, original_max_position = 8192 : i64} : (!ix.tensor<[1, 8, seq + 1, 128], f32>, !ix.tensor<[1, seq + 1], i64>) -> !ix.tensor<[1, 8, seq + 1, 128], f32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @scalings(%x: !ix.tensor<[1, 8, seq + 1, 128], f32>, %pos: !ix.tensor<[1, seq + 1], i64>) {
  %0 = ix.rope %x, %pos {theta = 1.000000e+04 : f64, scaling = "none"} : (!ix.tensor<[1, 8, seq + 1, 128], f32>, !ix.tensor<[1, seq + 1], i64>) -> !ix.tensor<[1, 8, seq + 1, 128], f32>
  %1 = ix.rope %x, %pos {theta = 1.000000e+04 : f64, scaling = "linear", factor = 2.000000e+00 : f64} : (!ix.tensor<[1, 8, seq + 1, 128], f32>, !ix.tensor<[1, seq + 1], i64>) -> !ix.tensor<[1, 8, seq + 1, 128], f32>
  %2 = ix.rope %x, %pos {theta = 1.000000e+04 : f64, scaling = "dynamic", factor = 4.000000e+00 : f64, original_max_position = 2048 : i64} : (!ix.tensor<[1, 8, seq + 1, 128], f32>, !ix.tensor<[1, seq + 1], i64>) -> !ix.tensor<[1, 8, seq + 1, 128], f32>
  %3 = ix.rope %x, %pos {theta = 5.000000e+05 : f64, scaling = "llama3", factor = 8.000000e+00 : f64, low_freq_factor = 1.000000e+00 : f64, high_freq_factor = 4.000000e+00 : f64, original_max_position = 8192 : i64} : (!ix.tensor<[1, 8, seq + 1, 128], f32>, !ix.tensor<[1, seq + 1], i64>) -> !ix.tensor<[1, 8, seq + 1, 128], f32>
  func.return
}
