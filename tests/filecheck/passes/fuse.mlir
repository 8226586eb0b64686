// RUN: inferx opt %s -p fuse --split-input-file | filecheck %s

// A norm feeding one linear is its prologue; the residual add is its epilogue: one gemm kernel.
// Weights stay outside kernels.
// CHECK-LABEL: func.func @norm_gemm_residual
// CHECK:      %[[G:.*]] = ix.weight {name = "g"}
// CHECK-NEXT: %[[W:.*]] = ix.weight {name = "w"}
// CHECK-NEXT: %[[K:.*]] = ix.kernel ""(%x, %[[G]], %[[W]]) {name = "k0"}
// CHECK:        ix.rmsnorm
// CHECK-NEXT:   ix.linear
// CHECK-NEXT:   ix.add
// CHECK-NEXT:   ix.yield
// CHECK:      func.return %[[K]]
func.func @norm_gemm_residual(%x: !ix.tensor<[batch, 16], f32>) -> !ix.tensor<[batch, 16], f32> {
  %g = ix.weight {name = "g"} : !ix.tensor<[16], f32>
  %n = ix.rmsnorm %x, %g {eps = 1.0e-06 : f64} : (!ix.tensor<[batch, 16], f32>, !ix.tensor<[16], f32>) -> !ix.tensor<[batch, 16], f32>
  %w = ix.weight {name = "w"} : !ix.tensor<[16, 16], f32>
  %y = ix.linear %n, %w : !ix.tensor<[batch, 16], f32>, !ix.tensor<[16, 16], f32> -> !ix.tensor<[batch, 16], f32>
  %r = ix.add %y, %x : (!ix.tensor<[batch, 16], f32>, !ix.tensor<[batch, 16], f32>) -> !ix.tensor<[batch, 16], f32>
  func.return %r : !ix.tensor<[batch, 16], f32>
}

// -----

// Negative: a norm with two users is not a prologue (it starts its own reduction kernel, which
// the neg joins), and an add whose other operand is computed after the gemm started does not
// join the gemm: it becomes a pointwise kernel.
// CHECK-LABEL: func.func @no_prologue
// CHECK:      ix.kernel ""
// CHECK:        ix.rmsnorm
// CHECK-NEXT:   ix.neg
// CHECK:      ix.kernel ""
// CHECK-NEXT: ^{{.*}}:
// CHECK-NEXT:   ix.linear
// CHECK-NEXT:   ix.yield
// CHECK:      ix.kernel ""
// CHECK-NEXT: ^{{.*}}:
// CHECK-NEXT:   ix.add
func.func @no_prologue(%x: !ix.tensor<[batch, 16], f32>) -> (!ix.tensor<[batch, 16], f32>, !ix.tensor<[batch, 16], f32>) {
  %g = ix.weight {name = "g"} : !ix.tensor<[16], f32>
  %n = ix.rmsnorm %x, %g {eps = 1.0e-06 : f64} : (!ix.tensor<[batch, 16], f32>, !ix.tensor<[16], f32>) -> !ix.tensor<[batch, 16], f32>
  %w = ix.weight {name = "w"} : !ix.tensor<[16, 16], f32>
  %y = ix.linear %n, %w : !ix.tensor<[batch, 16], f32>, !ix.tensor<[16, 16], f32> -> !ix.tensor<[batch, 16], f32>
  %m = ix.neg %n : (!ix.tensor<[batch, 16], f32>) -> !ix.tensor<[batch, 16], f32>
  %r = ix.add %y, %m : (!ix.tensor<[batch, 16], f32>, !ix.tensor<[batch, 16], f32>) -> !ix.tensor<[batch, 16], f32>
  func.return %r, %n : !ix.tensor<[batch, 16], f32>, !ix.tensor<[batch, 16], f32>
}

// -----

// A merged gate|up qlinear behind an RMSNorm: the norm is its prologue, and silu(gate) * up joins
// it (the int4 template pairs the halves' columns in registers): one kernel.
// CHECK-LABEL: func.func @qlinear_gated_pair
// CHECK:      ix.kernel ""
// CHECK-NEXT: ^{{.*}}:
// CHECK-NEXT:   ix.rmsnorm
// CHECK-NEXT:   ix.qlinear
// CHECK-NEXT:   ix.split
// CHECK-NEXT:   ix.silu
// CHECK-NEXT:   ix.mul
// CHECK-NEXT:   ix.yield
// CHECK-NOT:  ix.kernel
func.func @qlinear_gated_pair(%x: !ix.tensor<[batch, 64], f32>) -> !ix.tensor<[batch, 8], f32> {
  %w = ix.weight {name = "norm"} : !ix.tensor<[64], f32>
  %n = ix.rmsnorm %x, %w {eps = 1.0e-06 : f64} : (!ix.tensor<[batch, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[batch, 64], f32>
  %c = ix.weight {name = "gu.codes"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "gu.scales"} : !ix.tensor<[16, 2], f32>
  %y = ix.qlinear %n, %c, %s {group = 32 : i64} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], f32> -> !ix.tensor<[batch, 16], f32>
  %g, %u = ix.split %y {dim = -1 : i64} : (!ix.tensor<[batch, 16], f32>) -> (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 8], f32>)
  %a = ix.silu %g : (!ix.tensor<[batch, 8], f32>) -> !ix.tensor<[batch, 8], f32>
  %m = ix.mul %a, %u : (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 8], f32>) -> !ix.tensor<[batch, 8], f32>
  func.return %m : !ix.tensor<[batch, 8], f32>
}

// -----

// Negative: a LayerNorm is no prologue of a qlinear (the int4 template takes RMSNorm alone): it
// runs as a kernel of its own.
// CHECK-LABEL: func.func @qlinear_layernorm
// CHECK:      ix.kernel ""
// CHECK-NEXT: ^{{.*}}:
// CHECK-NEXT:   ix.layernorm
// CHECK-NEXT:   ix.yield
// CHECK:      ix.kernel ""
// CHECK-NEXT: ^{{.*}}:
// CHECK-NEXT:   ix.qlinear
func.func @qlinear_layernorm(%x: !ix.tensor<[batch, 64], f32>) -> !ix.tensor<[batch, 16], f32> {
  %w = ix.weight {name = "norm"} : !ix.tensor<[64], f32>
  %b = ix.weight {name = "bias"} : !ix.tensor<[64], f32>
  %n = ix.layernorm %x weight %w bias %b {eps = 1.0e-05 : f64} : !ix.tensor<[batch, 64], f32> weight !ix.tensor<[64], f32> bias !ix.tensor<[64], f32> -> !ix.tensor<[batch, 64], f32>
  %c = ix.weight {name = "q.codes"} : !ix.tensor<[16, 64], i4>
  %s = ix.weight {name = "q.scales"} : !ix.tensor<[16, 2], f32>
  %y = ix.qlinear %n, %c, %s {group = 32 : i64} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[16, 64], i4>, !ix.tensor<[16, 2], f32> -> !ix.tensor<[batch, 16], f32>
  func.return %y : !ix.tensor<[batch, 16], f32>
}
