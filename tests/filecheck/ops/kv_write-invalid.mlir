// Broken rules of ix.kv_write.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @heads_mismatch(%c: !ix.tensor<[batch, 2, 128, 16], f32>, %n: !ix.tensor<[batch, 4, seq, 16], f32>, %p: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.kv_write: new's kv heads (dim 1) must equal the cache's: 4 vs 2
  %0 = ix.kv_write %c, %n, %p : (!ix.tensor<[batch, 2, 128, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 2, 128, 16], f32>
  func.return
}

// -----

func.func @head_dim_mismatch(%c: !ix.tensor<[batch, 2, 128, 16], f32>, %n: !ix.tensor<[batch, 2, seq, 32], f32>, %p: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.kv_write: new's head_dim (dim 3) must equal the cache's: 32 vs 16
  %0 = ix.kv_write %c, %n, %p : (!ix.tensor<[batch, 2, 128, 16], f32>, !ix.tensor<[batch, 2, seq, 32], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 2, 128, 16], f32>
  func.return
}

// -----

func.func @batch_mismatch(%c: !ix.tensor<[1, 2, 128, 16], f32>, %n: !ix.tensor<[batch, 2, seq, 16], f32>, %p: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.kv_write: new's batch (dim 0) must equal the cache's: batch vs 1
  %0 = ix.kv_write %c, %n, %p : (!ix.tensor<[1, 2, 128, 16], f32>, !ix.tensor<[batch, 2, seq, 16], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[1, 2, 128, 16], f32>
  func.return
}

// -----

func.func @dtype_mismatch(%c: !ix.tensor<[batch, 2, 128, 16], f32>, %n: !ix.tensor<[batch, 2, seq, 16], bf16>, %p: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.kv_write: cache and new must have the same element type: f32 vs bf16
  %0 = ix.kv_write %c, %n, %p : (!ix.tensor<[batch, 2, 128, 16], f32>, !ix.tensor<[batch, 2, seq, 16], bf16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 2, 128, 16], f32>
  func.return
}

// -----

func.func @cache_rank(%c: !ix.tensor<[batch, 128, 32], f32>, %n: !ix.tensor<[batch, 2, seq, 16], f32>, %p: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.kv_write: cache must have rank 4 [batch, kv_heads, max_ctx, head_dim], got [batch, 128, 32] f32
  %0 = ix.kv_write %c, %n, %p : (!ix.tensor<[batch, 128, 32], f32>, !ix.tensor<[batch, 2, seq, 16], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 128, 32], f32>
  func.return
}

// -----

func.func @new_rank(%c: !ix.tensor<[batch, 2, 128, 16], f32>, %n: !ix.tensor<[batch, seq, 32], f32>, %p: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.kv_write: new must have rank 4 [batch, heads, seq, head_dim], got [batch, seq, 32] f32
  %0 = ix.kv_write %c, %n, %p : (!ix.tensor<[batch, 2, 128, 16], f32>, !ix.tensor<[batch, seq, 32], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 2, 128, 16], f32>
  func.return
}

// -----

func.func @positions_seq(%c: !ix.tensor<[batch, 2, 128, 16], f32>, %n: !ix.tensor<[batch, 2, seq, 16], f32>, %p: !ix.tensor<[batch, 1], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.kv_write: positions' seq must equal new's: 1 vs seq
  %0 = ix.kv_write %c, %n, %p : (!ix.tensor<[batch, 2, 128, 16], f32>, !ix.tensor<[batch, 2, seq, 16], f32>, !ix.tensor<[batch, 1], i32>) -> !ix.tensor<[batch, 2, 128, 16], f32>
  func.return
}

// -----

func.func @positions_batch(%c: !ix.tensor<[batch, 2, 128, 16], f32>, %n: !ix.tensor<[batch, 2, seq, 16], f32>, %p: !ix.tensor<[2, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.kv_write: positions' batch must equal new's: 2 vs batch
  %0 = ix.kv_write %c, %n, %p : (!ix.tensor<[batch, 2, 128, 16], f32>, !ix.tensor<[batch, 2, seq, 16], f32>, !ix.tensor<[2, seq], i32>) -> !ix.tensor<[batch, 2, 128, 16], f32>
  func.return
}

// -----

func.func @positions_rank(%c: !ix.tensor<[batch, 2, 128, 16], f32>, %n: !ix.tensor<[batch, 2, seq, 16], f32>, %p: !ix.tensor<[seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.kv_write: positions must have rank 2 [batch, seq], got [seq] i32
  %0 = ix.kv_write %c, %n, %p : (!ix.tensor<[batch, 2, 128, 16], f32>, !ix.tensor<[batch, 2, seq, 16], f32>, !ix.tensor<[seq], i32>) -> !ix.tensor<[batch, 2, 128, 16], f32>
  func.return
}

// -----

func.func @float_positions(%c: !ix.tensor<[batch, 2, 128, 16], f32>, %n: !ix.tensor<[batch, 2, seq, 16], f32>, %p: !ix.tensor<[batch, seq], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.kv_write: positions must be an i32 or i64 tensor, got f32
  %0 = ix.kv_write %c, %n, %p : (!ix.tensor<[batch, 2, 128, 16], f32>, !ix.tensor<[batch, 2, seq, 16], f32>, !ix.tensor<[batch, seq], f32>) -> !ix.tensor<[batch, 2, 128, 16], f32>
  func.return
}

// -----

func.func @wrong_result(%c: !ix.tensor<[batch, 2, 128, 16], f32>, %n: !ix.tensor<[batch, 2, seq, 16], f32>, %p: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.kv_write: result type is [batch, 2, seq, 16] f32 but the operands give [batch, 2, 128, 16] f32
  %0 = ix.kv_write %c, %n, %p : (!ix.tensor<[batch, 2, 128, 16], f32>, !ix.tensor<[batch, 2, seq, 16], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 2, seq, 16], f32>
  func.return
}

// -----

func.func @fp8_cache_without_scale(%c: !ix.tensor<[batch, 2, 128, 16], f8e4m3>, %n: !ix.tensor<[batch, 2, seq, 16], f32>, %p: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.kv_write: an f8e4m3 cache written from float values needs its scale
  %0 = ix.kv_write %c, %n, %p : (!ix.tensor<[batch, 2, 128, 16], f8e4m3>, !ix.tensor<[batch, 2, seq, 16], f32>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 2, 128, 16], f8e4m3>
  func.return
}

// -----

func.func @scale_for_a_float_cache(%c: !ix.tensor<[batch, 2, 128, 16], f32>, %n: !ix.tensor<[batch, 2, seq, 16], f32>, %p: !ix.tensor<[batch, seq], i32>, %s: !ix.tensor<[2], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.kv_write: a scale goes with an f8e4m3 cache, got a f32 cache
  %0 = ix.kv_write %c, %n, %p, %s : (!ix.tensor<[batch, 2, 128, 16], f32>, !ix.tensor<[batch, 2, seq, 16], f32>, !ix.tensor<[batch, seq], i32>, !ix.tensor<[2], f32>) -> !ix.tensor<[batch, 2, 128, 16], f32>
  func.return
}

// -----

func.func @scale_per_head(%c: !ix.tensor<[batch, 2, 128, 16], f8e4m3>, %n: !ix.tensor<[batch, 2, seq, 16], f32>, %p: !ix.tensor<[batch, seq], i32>, %s: !ix.tensor<[4], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.kv_write: scale's length must equal the cache's kv heads: 4 vs 2
  %0 = ix.kv_write %c, %n, %p, %s : (!ix.tensor<[batch, 2, 128, 16], f8e4m3>, !ix.tensor<[batch, 2, seq, 16], f32>, !ix.tensor<[batch, seq], i32>, !ix.tensor<[4], f32>) -> !ix.tensor<[batch, 2, 128, 16], f8e4m3>
  func.return
}
