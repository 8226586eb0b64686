// settle-dynamic-rope: dynamic NTK RoPE becomes plain RoPE up to its original length; past it, an error.
// RUN: inferx opt %s -p "settle-dynamic-rope{max-seq-len=8}" --split-input-file | filecheck %s
// RUN: not inferx opt %s -p "settle-dynamic-rope{max-seq-len=64}" 2>&1 | filecheck %s --check-prefix=LONG

// Within the original length the rotation is plain; other scalings are left alone.
// CHECK-LABEL: func.func @within
// CHECK:         ix.rope %x, %pos {{{.*}}scaling = "none"
// CHECK:         ix.rope %x, %pos {{{.*}}scaling = "linear"
// LONG: error: {{.*}}dynamic NTK RoPE is not generated past original_max_position 32: use max_seq_len <= 32 (got 64)
func.func @within(%x: !ix.tensor<[batch, 4, seq, 64], f32>, %pos: !ix.tensor<[batch, seq], i32>) {
  %0 = ix.rope %x, %pos {theta = 1.0e+04 : f64, scaling = "dynamic", factor = 2.0 : f64, original_max_position = 32 : i64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  %1 = ix.rope %x, %pos {theta = 1.0e+04 : f64, scaling = "linear", factor = 2.0 : f64} : (!ix.tensor<[batch, 4, seq, 64], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 4, seq, 64], f32>
  func.return
}
