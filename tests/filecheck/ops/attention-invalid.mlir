// Broken rules of ix.attention.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @gqa_not_divisible(%q: !ix.tensor<[batch, 6, seq, 16], f32>, %k: !ix.tensor<[batch, 4, ctx, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: query heads must be a multiple of kv heads (GQA): cannot prove 4 divides 6
  %0 = ix.attention %q, %k, %k : !ix.tensor<[batch, 6, seq, 16], f32>, !ix.tensor<[batch, 4, ctx, 16], f32>, !ix.tensor<[batch, 4, ctx, 16], f32> -> !ix.tensor<[batch, 6, seq, 16], f32>
  func.return
}

// -----

func.func @gqa_symbolic_heads(%q: !ix.tensor<[batch, heads, seq, 16], f32>, %k: !ix.tensor<[batch, 2, ctx, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: query heads must be a multiple of kv heads (GQA): cannot prove 2 divides heads
  %0 = ix.attention %q, %k, %k : !ix.tensor<[batch, heads, seq, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32> -> !ix.tensor<[batch, heads, seq, 16], f32>
  func.return
}

// -----

func.func @symbolic_kv_heads(%q: !ix.tensor<[batch, 4, seq, 16], f32>, %k: !ix.tensor<[batch, kvh, ctx, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: kv heads must be a static positive int, got kvh
  %0 = ix.attention %q, %k, %k : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, kvh, ctx, 16], f32>, !ix.tensor<[batch, kvh, ctx, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @head_dim_mismatch(%q: !ix.tensor<[batch, 4, seq, 16], f32>, %k: !ix.tensor<[batch, 4, ctx, 32], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: k's head_dim must equal q's: 32 vs 16
  %0 = ix.attention %q, %k, %k : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, ctx, 32], f32>, !ix.tensor<[batch, 4, ctx, 32], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @kv_length_mismatch(%q: !ix.tensor<[batch, 4, seq, 16], f32>, %k: !ix.tensor<[batch, 4, ctx, 16], f32>, %v: !ix.tensor<[batch, 4, ctx + 1, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: v's context length must equal k's: ctx + 1 vs ctx
  %0 = ix.attention %q, %k, %v : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, ctx, 16], f32>, !ix.tensor<[batch, 4, ctx + 1, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @kv_heads_mismatch(%q: !ix.tensor<[batch, 4, seq, 16], f32>, %k: !ix.tensor<[batch, 4, ctx, 16], f32>, %v: !ix.tensor<[batch, 2, ctx, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: v's kv heads must equal k's: 2 vs 4
  %0 = ix.attention %q, %k, %v : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, ctx, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @batch_mismatch(%q: !ix.tensor<[batch, 4, seq, 16], f32>, %k: !ix.tensor<[1, 4, ctx, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: k's batch must equal q's: 1 vs batch
  %0 = ix.attention %q, %k, %k : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[1, 4, ctx, 16], f32>, !ix.tensor<[1, 4, ctx, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @q_rank(%q: !ix.tensor<[batch, seq, 64], f32>, %k: !ix.tensor<[batch, 4, ctx, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: q must have rank 4 [batch, heads, seq, head_dim], got [batch, seq, 64] f32
  %0 = ix.attention %q, %k, %k : !ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, 4, ctx, 16], f32>, !ix.tensor<[batch, 4, ctx, 16], f32> -> !ix.tensor<[batch, seq, 64], f32>
  func.return
}

// -----

func.func @dtype_mismatch(%q: !ix.tensor<[batch, 4, seq, 16], f32>, %k: !ix.tensor<[batch, 4, ctx, 16], bf16>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: q and k must have the same element type: f32 vs bf16
  %0 = ix.attention %q, %k, %k : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, ctx, 16], bf16>, !ix.tensor<[batch, 4, ctx, 16], bf16> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @int_q(%q: !ix.tensor<[batch, 4, seq, 16], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: q must be a float tensor, got i32
  %0 = ix.attention %q, %q, %q : !ix.tensor<[batch, 4, seq, 16], i32>, !ix.tensor<[batch, 4, seq, 16], i32>, !ix.tensor<[batch, 4, seq, 16], i32> -> !ix.tensor<[batch, 4, seq, 16], i32>
  func.return
}

// -----

func.func @positions_seq(%q: !ix.tensor<[batch, 4, seq, 16], f32>, %pos: !ix.tensor<[batch, seq + 1], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: positions' seq must equal q's: seq + 1 vs seq
  %0 = ix.attention %q, %q, %q positions %pos : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> positions !ix.tensor<[batch, seq + 1], i32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @positions_rank(%q: !ix.tensor<[batch, 4, seq, 16], f32>, %pos: !ix.tensor<[batch], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: positions must have rank 2 [batch, seq], got [batch] i32
  %0 = ix.attention %q, %q, %q positions %pos : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> positions !ix.tensor<[batch], i32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @float_positions(%q: !ix.tensor<[batch, 4, seq, 16], f32>, %pos: !ix.tensor<[batch, seq], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: positions must be an i32 or i64 tensor, got f32
  %0 = ix.attention %q, %q, %q positions %pos : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> positions !ix.tensor<[batch, seq], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @kv_lens_rank(%q: !ix.tensor<[batch, 4, seq, 16], f32>, %lens: !ix.tensor<[batch, seq], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: kv_lens must have rank 1 [batch], got [batch, seq] i32
  %0 = ix.attention %q, %q, %q kv_lens %lens : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> kv_lens !ix.tensor<[batch, seq], i32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @kv_lens_batch(%q: !ix.tensor<[batch, 4, seq, 16], f32>, %pos: !ix.tensor<[batch, seq], i32>, %lens: !ix.tensor<[2], i32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: kv_lens' batch must equal q's: 2 vs batch
  %0 = ix.attention %q, %q, %q positions %pos kv_lens %lens : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> positions !ix.tensor<[batch, seq], i32> kv_lens !ix.tensor<[2], i32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @zero_window(%q: !ix.tensor<[batch, 4, seq, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: window must be positive
  %0 = ix.attention %q, %q, %q {causal, window = 0 : i64} : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @window_not_int(%q: !ix.tensor<[batch, 4, seq, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: attribute 'window' must be an integer, got 1.500000e+00 : f64
  %0 = ix.attention %q, %q, %q {window = 1.5 : f64} : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @negative_softcap(%q: !ix.tensor<[batch, 4, seq, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: softcap must be positive
  %0 = ix.attention %q, %q, %q {softcap = -5.0 : f64} : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @scale_not_a_number(%q: !ix.tensor<[batch, 4, seq, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: attribute 'scale' must be a float, got "auto"
  %0 = ix.attention %q, %q, %q {scale = "auto"} : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @zero_scale(%q: !ix.tensor<[batch, 4, seq, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: scale must be positive
  %0 = ix.attention %q, %q, %q {scale = 0.0 : f64} : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @causal_not_a_flag(%q: !ix.tensor<[batch, 4, seq, 16], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: attribute 'causal' is a flag (unit attribute), got 1 : i64
  %0 = ix.attention %q, %q, %q {causal = 1 : i64} : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, seq, 16], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @wrong_result(%q: !ix.tensor<[batch, 4, seq, 16], f32>, %k: !ix.tensor<[batch, 4, ctx, 16], f32>, %v: !ix.tensor<[batch, 4, ctx, 8], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: result type is [batch, 4, seq, 16] f32 but the operands give [batch, 4, seq, 8] f32
  %0 = ix.attention %q, %k, %v : !ix.tensor<[batch, 4, seq, 16], f32>, !ix.tensor<[batch, 4, ctx, 16], f32>, !ix.tensor<[batch, 4, ctx, 8], f32> -> !ix.tensor<[batch, 4, seq, 16], f32>
  func.return
}

// -----

func.func @one_scale(%q: !ix.tensor<[batch, 4, 1, 16], f32>, %k: !ix.tensor<[batch, 2, ctx, 16], f8e4m3>, %s: !ix.tensor<[2], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: k_scale and v_scale come together (an FP8 KV cache)
  %0 = ix.attention %q, %k, %k k_scale %s : !ix.tensor<[batch, 4, 1, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f8e4m3>, !ix.tensor<[batch, 2, ctx, 16], f8e4m3> k_scale !ix.tensor<[2], f32> -> !ix.tensor<[batch, 4, 1, 16], f32>
  func.return
}

// -----

func.func @float_cache_with_scales(%q: !ix.tensor<[batch, 4, 1, 16], f32>, %k: !ix.tensor<[batch, 2, ctx, 16], f32>, %s: !ix.tensor<[2], f32>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: k must be f8e4m3 with k_scale, got f32
  %0 = ix.attention %q, %k, %k k_scale %s v_scale %s : !ix.tensor<[batch, 4, 1, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f32> k_scale !ix.tensor<[2], f32> v_scale !ix.tensor<[2], f32> -> !ix.tensor<[batch, 4, 1, 16], f32>
  func.return
}

// -----

func.func @fp8_cache_without_scales(%q: !ix.tensor<[batch, 4, 1, 16], f32>, %k: !ix.tensor<[batch, 2, ctx, 16], f8e4m3>) {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.attention: q and k must have the same element type: f32 vs f8e4m3
  %0 = ix.attention %q, %k, %k : !ix.tensor<[batch, 4, 1, 16], f32>, !ix.tensor<[batch, 2, ctx, 16], f8e4m3>, !ix.tensor<[batch, 2, ctx, 16], f8e4m3> -> !ix.tensor<[batch, 4, 1, 16], f32>
  func.return
}
