// RUN: inferx opt %s -p "fp8-inputs" --split-input-file | filecheck %s
// RUN: inferx opt %s -p "fp8-inputs{decode-min-rows=64}" --split-input-file | filecheck %s --check-prefix=DEC

// Two prompt GEMMs of one normed input and one of another: the first input gets one fp8quant
// kernel (the norm moved into it) that both read as E4M3 with row scales; the second its own.
// The GEMMs no longer take x or the norm's weight.
// CHECK-LABEL: func.func @prompt
// CHECK:      %[[Q:.*]], %[[R:.*]] = ix.kernel "fp8quant"(%x, %g) {name = "k0_x"}
// CHECK-NEXT: ^{{.*}}:
// CHECK-NEXT:   %[[N:.*]] = ix.rmsnorm
// CHECK-NEXT:   %{{.*}}, %{{.*}} = ix.fp8_quantize %[[N]] : !ix.tensor<[batch, seq, 64], f16> -> !ix.tensor<[batch, seq, 64], f8e4m3>, !ix.tensor<[batch, seq], f32>
// CHECK:      %[[H:.*]] = ix.kernel "fp8gemm"(%c0, %s0, %[[Q]], %[[R]]) {name = "k0"}
// CHECK-NOT:    ix.rmsnorm
// CHECK:        ix.fp8_linear %{{.*}}, %{{.*}}, %{{.*}} row_scales %{{.*}} {out_dtype = "f16"} : !ix.tensor<[batch, seq, 64], f8e4m3>
// CHECK-NOT:  ix.kernel "fp8quant"
// CHECK:      ix.kernel "fp8gemm"(%c2, %s2, %[[Q]], %[[R]]) {name = "k2"}
// CHECK:      %[[Q1:.*]], %[[R1:.*]] = ix.kernel "fp8quant"(%[[H]]) {name = "k1_x"}
// CHECK:        ix.fp8_quantize %{{.*}} :
// CHECK:      ix.kernel "fp8gemm"(%c1, %s1, %[[Q1]], %[[R1]]) {name = "k1"}
// CHECK:        ix.fp8_linear {{.*}} row_scales
func.func @prompt(%x: !ix.tensor<[batch, seq, 64], f16>) -> (!ix.tensor<[batch, seq, 16], f16>, !ix.tensor<[batch, seq, 32], f16>) {
  %g = ix.weight {name = "g"} : !ix.tensor<[64], f16>
  %c0 = ix.weight {name = "c0"} : !ix.tensor<[32, 64], f8e4m3>
  %s0 = ix.weight {name = "s0"} : !ix.tensor<[32], f32>
  %c1 = ix.weight {name = "c1"} : !ix.tensor<[16, 32], f8e4m3>
  %s1 = ix.weight {name = "s1"} : !ix.tensor<[16], f32>
  %c2 = ix.weight {name = "c2"} : !ix.tensor<[32, 64], f8e4m3>
  %s2 = ix.weight {name = "s2"} : !ix.tensor<[32], f32>
  %h = ix.kernel "fp8gemm"(%x, %g, %c0, %s0) {name = "k0"} : (!ix.tensor<[batch, seq, 64], f16>, !ix.tensor<[64], f16>, !ix.tensor<[32, 64], f8e4m3>, !ix.tensor<[32], f32>) -> !ix.tensor<[batch, seq, 32], f16> {
  ^bb0(%a: !ix.tensor<[batch, seq, 64], f16>, %b: !ix.tensor<[64], f16>, %c: !ix.tensor<[32, 64], f8e4m3>, %s: !ix.tensor<[32], f32>):
    %n = ix.rmsnorm %a, %b {eps = 1.000000e-06 : f64} : (!ix.tensor<[batch, seq, 64], f16>, !ix.tensor<[64], f16>) -> !ix.tensor<[batch, seq, 64], f16>
    %y = ix.fp8_linear %n, %c, %s : !ix.tensor<[batch, seq, 64], f16>, !ix.tensor<[32, 64], f8e4m3>, !ix.tensor<[32], f32> -> !ix.tensor<[batch, seq, 32], f16>
    ix.yield %y : !ix.tensor<[batch, seq, 32], f16>
  }
  %h2 = ix.kernel "fp8gemm"(%x, %g, %c2, %s2) {name = "k2"} : (!ix.tensor<[batch, seq, 64], f16>, !ix.tensor<[64], f16>, !ix.tensor<[32, 64], f8e4m3>, !ix.tensor<[32], f32>) -> !ix.tensor<[batch, seq, 32], f16> {
  ^bb0(%a: !ix.tensor<[batch, seq, 64], f16>, %b: !ix.tensor<[64], f16>, %c: !ix.tensor<[32, 64], f8e4m3>, %s: !ix.tensor<[32], f32>):
    %n = ix.rmsnorm %a, %b {eps = 1.000000e-06 : f64} : (!ix.tensor<[batch, seq, 64], f16>, !ix.tensor<[64], f16>) -> !ix.tensor<[batch, seq, 64], f16>
    %y = ix.fp8_linear %n, %c, %s : !ix.tensor<[batch, seq, 64], f16>, !ix.tensor<[32, 64], f8e4m3>, !ix.tensor<[32], f32> -> !ix.tensor<[batch, seq, 32], f16>
    ix.yield %y : !ix.tensor<[batch, seq, 32], f16>
  }
  %o = ix.kernel "fp8gemm"(%h, %c1, %s1) {name = "k1"} : (!ix.tensor<[batch, seq, 32], f16>, !ix.tensor<[16, 32], f8e4m3>, !ix.tensor<[16], f32>) -> !ix.tensor<[batch, seq, 16], f16> {
  ^bb0(%a: !ix.tensor<[batch, seq, 32], f16>, %c: !ix.tensor<[16, 32], f8e4m3>, %s: !ix.tensor<[16], f32>):
    %y = ix.fp8_linear %a, %c, %s : !ix.tensor<[batch, seq, 32], f16>, !ix.tensor<[16, 32], f8e4m3>, !ix.tensor<[16], f32> -> !ix.tensor<[batch, seq, 16], f16>
    ix.yield %y : !ix.tensor<[batch, seq, 16], f16>
  }
  func.return %o, %h2 : !ix.tensor<[batch, seq, 16], f16>, !ix.tensor<[batch, seq, 32], f16>
}

// -----

// Decode rows (no seq) keep quantizing x in the GEMM by default. With decode-min-rows, the GEMM
// keeps its norm and x and is given x quantized by an fp8quant kernel that may skip batches below
// 64 rows, as the GEMM reads it from there.
// CHECK-LABEL: func.func @decode
// CHECK-NOT: fp8quant
// CHECK: ix.fp8_linear %{{[^ ]*}}, %{{[^ ]*}}, %{{[^ ]*}} :
// DEC-LABEL: func.func @decode
// DEC:      %[[Q:.*]], %[[R:.*]] = ix.kernel "fp8quant"(%x, %g) {name = "k1_x"}
// DEC:        ix.rmsnorm
// DEC:        ix.fp8_quantize %{{.*}} {min_rows = 64 : i64}
// DEC:      ix.kernel "fp8gemm"(%x, %g, %c1, %s1, %[[Q]], %[[R]]) {name = "k1"}
// DEC:        %[[N:.*]] = ix.rmsnorm
// DEC-NEXT:   ix.fp8_linear %[[N]], %{{[^ ]*}}, %{{[^ ]*}} given %{{[^ ]*}} given_scales %{{[^ ]*}} {given_min_rows = 64 : i64} : !ix.tensor<[batch, 1, 32], f16>, {{.*}} given !ix.tensor<[batch, 1, 32], f8e4m3> given_scales !ix.tensor<[batch, 1], f32> ->
func.func @decode(%x: !ix.tensor<[batch, 1, 32], f16>) -> !ix.tensor<[batch, 1, 16], f16> {
  %g = ix.weight {name = "g"} : !ix.tensor<[32], f16>
  %c1 = ix.weight {name = "c1"} : !ix.tensor<[16, 32], f8e4m3>
  %s1 = ix.weight {name = "s1"} : !ix.tensor<[16], f32>
  %o = ix.kernel "fp8gemm"(%x, %g, %c1, %s1) {name = "k1"} : (!ix.tensor<[batch, 1, 32], f16>, !ix.tensor<[32], f16>, !ix.tensor<[16, 32], f8e4m3>, !ix.tensor<[16], f32>) -> !ix.tensor<[batch, 1, 16], f16> {
  ^bb0(%a: !ix.tensor<[batch, 1, 32], f16>, %b: !ix.tensor<[32], f16>, %c: !ix.tensor<[16, 32], f8e4m3>, %s: !ix.tensor<[16], f32>):
    %n = ix.rmsnorm %a, %b {eps = 1.000000e-06 : f64} : (!ix.tensor<[batch, 1, 32], f16>, !ix.tensor<[32], f16>) -> !ix.tensor<[batch, 1, 32], f16>
    %y = ix.fp8_linear %n, %c, %s : !ix.tensor<[batch, 1, 32], f16>, !ix.tensor<[16, 32], f8e4m3>, !ix.tensor<[16], f32> -> !ix.tensor<[batch, 1, 16], f16>
    ix.yield %y : !ix.tensor<[batch, 1, 16], f16>
  }
  func.return %o : !ix.tensor<[batch, 1, 16], f16>
}
