// RUN: inferx opt %s -p "plan-memory{batch=4}" --split-input-file | filecheck %s
// RUN: inferx opt %s -p "plan-memory{batch=4}" --split-input-file | inferx opt - --split-input-file | filecheck %s
// RUN: not inferx opt %s -p "plan-memory{batch=4 max-ctx=0}" 2>&1 | filecheck %s --check-prefix=BOUND

// Three kernels in a row, each reading only the previous result, and a fourth that returns:
// k0#0 dies when k1 has read it, so k2#0 reuses its space (offset 0). At batch=4 each buffer is
// 4 * 256 * 4 = 4096 bytes: peak 8192 against 12288 without reuse. k3#0 is returned: not planned.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: ix.memory_plan = {alignment = 256 : i64, buffers = [
// CHECK-SAME: {id = "k0#0", bytes = #ix.dim<1024 * batch>, live = array<i64: 0, 1>},
// CHECK-SAME: {id = "k1#0", bytes = #ix.dim<1024 * batch>, live = array<i64: 1, 2>},
// CHECK-SAME: {id = "k2#0", bytes = #ix.dim<1024 * batch>, live = array<i64: 2, 3>}],
// CHECK-SAME: kv_aliases = [], outputs = [{id = "k3#0", result = 0 : i64}],
// CHECK-SAME: buckets = [{dims = {batch = 4 : i64}, peak = 8192 : i64, no_reuse = 12288 : i64, kv = 0 : i64,
// CHECK-SAME: offsets = array<i64: 0, 4096, 0>}]}
func.func @chain(%x: !ix.tensor<[batch, 256], f32>) -> !ix.tensor<[batch, 256], f32> {
  %a = ix.kernel "pointwise"(%x) {name = "k0"} : (!ix.tensor<[batch, 256], f32>) -> !ix.tensor<[batch, 256], f32> {
  ^bb0(%x1: !ix.tensor<[batch, 256], f32>):
    %y = ix.neg %x1 : (!ix.tensor<[batch, 256], f32>) -> !ix.tensor<[batch, 256], f32>
    ix.yield %y : !ix.tensor<[batch, 256], f32>
  }
  %b = ix.kernel "pointwise"(%a) {name = "k1"} : (!ix.tensor<[batch, 256], f32>) -> !ix.tensor<[batch, 256], f32> {
  ^bb0(%a1: !ix.tensor<[batch, 256], f32>):
    %y = ix.exp %a1 : (!ix.tensor<[batch, 256], f32>) -> !ix.tensor<[batch, 256], f32>
    ix.yield %y : !ix.tensor<[batch, 256], f32>
  }
  %c = ix.kernel "pointwise"(%b) {name = "k2"} : (!ix.tensor<[batch, 256], f32>) -> !ix.tensor<[batch, 256], f32> {
  ^bb0(%b1: !ix.tensor<[batch, 256], f32>):
    %y = ix.neg %b1 : (!ix.tensor<[batch, 256], f32>) -> !ix.tensor<[batch, 256], f32>
    ix.yield %y : !ix.tensor<[batch, 256], f32>
  }
  %d = ix.kernel "pointwise"(%c) {name = "k3"} : (!ix.tensor<[batch, 256], f32>) -> !ix.tensor<[batch, 256], f32> {
  ^bb0(%c1: !ix.tensor<[batch, 256], f32>):
    %y = ix.exp %c1 : (!ix.tensor<[batch, 256], f32>) -> !ix.tensor<[batch, 256], f32>
    ix.yield %y : !ix.tensor<[batch, 256], f32>
  }
  func.return %d : !ix.tensor<[batch, 256], f32>
}

// -----

// Negative: k2 reads both k0#0 and k1#0 and writes two results, so all four buffers are live at
// k2 and none shares space. k1#0 is f16, 2 * 4 * 100 = 800 bytes at batch=4, rounded up to 1024.
// Largest first, ties in definition order: k0#0 at 0, k2#0 above it, then k1#0 and k2#1.
// CHECK-LABEL: func.func @overlap
// CHECK-SAME: buffers = [
// CHECK-SAME: {id = "k0#0", bytes = #ix.dim<1024 * batch>, live = array<i64: 0, 2>},
// CHECK-SAME: {id = "k1#0", bytes = #ix.dim<256 * ((200 * batch + 255) floordiv 256)>, live = array<i64: 1, 2>},
// CHECK-SAME: {id = "k2#0", bytes = #ix.dim<1024 * batch>, live = array<i64: 2, 3>},
// CHECK-SAME: {id = "k2#1", bytes = #ix.dim<256 * ((200 * batch + 255) floordiv 256)>, live = array<i64: 2, 3>}],
// CHECK-SAME: peak = 10240 : i64, no_reuse = 10240 : i64, kv = 0 : i64, offsets = array<i64: 0, 8192, 4096, 9216>
func.func @overlap(%x: !ix.tensor<[batch, 256], f32>, %h: !ix.tensor<[batch, 100], f16>) -> (!ix.tensor<[batch, 256], f32>, !ix.tensor<[batch, 100], f16>) {
  %a = ix.kernel "pointwise"(%x) {name = "k0"} : (!ix.tensor<[batch, 256], f32>) -> !ix.tensor<[batch, 256], f32> {
  ^bb0(%x1: !ix.tensor<[batch, 256], f32>):
    %y = ix.neg %x1 : (!ix.tensor<[batch, 256], f32>) -> !ix.tensor<[batch, 256], f32>
    ix.yield %y : !ix.tensor<[batch, 256], f32>
  }
  %b = ix.kernel "pointwise"(%h) {name = "k1"} : (!ix.tensor<[batch, 100], f16>) -> !ix.tensor<[batch, 100], f16> {
  ^bb0(%h1: !ix.tensor<[batch, 100], f16>):
    %y = ix.exp %h1 : (!ix.tensor<[batch, 100], f16>) -> !ix.tensor<[batch, 100], f16>
    ix.yield %y : !ix.tensor<[batch, 100], f16>
  }
  %c, %e = ix.kernel "pointwise"(%a, %b) {name = "k2"} : (!ix.tensor<[batch, 256], f32>, !ix.tensor<[batch, 100], f16>) -> (!ix.tensor<[batch, 256], f32>, !ix.tensor<[batch, 100], f16>) {
  ^bb0(%a1: !ix.tensor<[batch, 256], f32>, %b1: !ix.tensor<[batch, 100], f16>):
    %y = ix.neg %a1 : (!ix.tensor<[batch, 256], f32>) -> !ix.tensor<[batch, 256], f32>
    %z = ix.neg %b1 : (!ix.tensor<[batch, 100], f16>) -> !ix.tensor<[batch, 100], f16>
    ix.yield %y, %z : !ix.tensor<[batch, 256], f32>, !ix.tensor<[batch, 100], f16>
  }
  %d, %f = ix.kernel "pointwise"(%c, %e) {name = "k3"} : (!ix.tensor<[batch, 256], f32>, !ix.tensor<[batch, 100], f16>) -> (!ix.tensor<[batch, 256], f32>, !ix.tensor<[batch, 100], f16>) {
  ^bb0(%c1: !ix.tensor<[batch, 256], f32>, %e1: !ix.tensor<[batch, 100], f16>):
    %y = ix.exp %c1 : (!ix.tensor<[batch, 256], f32>) -> !ix.tensor<[batch, 256], f32>
    %z = ix.exp %e1 : (!ix.tensor<[batch, 100], f16>) -> !ix.tensor<[batch, 100], f16>
    ix.yield %y, %z : !ix.tensor<[batch, 256], f32>, !ix.tensor<[batch, 100], f16>
  }
  func.return %d, %f : !ix.tensor<[batch, 256], f32>, !ix.tensor<[batch, 100], f16>
}

// -----

// A kv_write of a function argument is written in place: k0#0 is recorded as an alias of
// argument 0 (%cache), neither a buffer nor an output, though the func returns it. The KV bytes
// are the cache's at batch=4, ctx=max-ctx=4096: 4 * 2 * 4096 * 8 * 2.
// CHECK-LABEL: func.func @kv_in_place
// CHECK-SAME: buffers = [], kv_aliases = [{id = "k0#0", arg = 0 : i64, arg_name = "cache", bytes = #ix.dim<32 * batch * ctx>}],
// CHECK-SAME: outputs = [],
// CHECK-SAME: buckets = [{dims = {batch = 4 : i64, ctx = 4096 : i64, seq = 1 : i64}, peak = 0 : i64, no_reuse = 0 : i64, kv = 524288 : i64, offsets = array<i64>},
// CHECK-SAME: {dims = {batch = 4 : i64, ctx = 4096 : i64, seq = 512 : i64}
// BOUND: error: plan-memory: bucket bounds for 'ctx' must be integers >= 1, got [0]
func.func @kv_in_place(%cache: !ix.tensor<[batch, 2, ctx, 8], f16>, %new: !ix.tensor<[batch, 2, seq, 8], f16>, %pos: !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 2, ctx, 8], f16> {
  %c = ix.kernel "pointwise"(%cache, %new, %pos) {name = "k0"} : (!ix.tensor<[batch, 2, ctx, 8], f16>, !ix.tensor<[batch, 2, seq, 8], f16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 2, ctx, 8], f16> {
  ^bb0(%c1: !ix.tensor<[batch, 2, ctx, 8], f16>, %n1: !ix.tensor<[batch, 2, seq, 8], f16>, %p1: !ix.tensor<[batch, seq], i32>):
    %w = ix.kv_write %c1, %n1, %p1 : (!ix.tensor<[batch, 2, ctx, 8], f16>, !ix.tensor<[batch, 2, seq, 8], f16>, !ix.tensor<[batch, seq], i32>) -> !ix.tensor<[batch, 2, ctx, 8], f16>
    ix.yield %w : !ix.tensor<[batch, 2, ctx, 8], f16>
  }
  func.return %c : !ix.tensor<[batch, 2, ctx, 8], f16>
}
