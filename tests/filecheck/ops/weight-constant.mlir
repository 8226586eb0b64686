// ix.weight names a tensor of the weight store (static shape); ix.constant is a splat of one
// scalar, of any shape (symbolic dims included) and element type.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @weights(
// CHECK-SAME: ) {
// CHECK-NEXT: %0 = ix.weight {name = "model.embed_tokens.weight"} : !ix.tensor<[49152, 576], bf16>
// CHECK-NEXT: %1 = ix.weight {name = "lm_head"} : !ix.tensor<[576], f32>
// CHECK-NEXT: %2 = ix.weight {name = "q4.scales"} : !ix.tensor<[64, 8], i4>
// CHECK-NEXT: %3 = ix.weight {name = "scalar"} : !ix.tensor<[], f16>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @weights() {
  %0 = ix.weight {name = "model.embed_tokens.weight"} : !ix.tensor<[49152, 576], bf16>
  %1 = ix.weight {name = "lm_head"} : !ix.tensor<[576], f32>
  %2 = ix.weight {name = "q4.scales"} : !ix.tensor<[64, 8], i4>
  %3 = ix.weight {name = "scalar"} : !ix.tensor<[], f16>
  func.return
}

// CHECK-LABEL: func.func @constants(
// CHECK-SAME: ) {
// CHECK-NEXT: %0 = ix.constant {value = 1.000000e+00 : f32} : !ix.tensor<[], f32>
// CHECK-NEXT: %1 = ix.constant {value = -5.000000e-01 : f64} : !ix.tensor<[batch, seq, 64], bf16>
// CHECK-NEXT: %2 = ix.constant {value = 0 : i64} : !ix.tensor<[batch, seq + 1], i32>
// CHECK-NEXT: %3 = ix.constant {value = 2 : i64} : !ix.tensor<[seq floordiv 2], f16>
// CHECK-NEXT: %4 = ix.constant {value = 1 : i64} : !ix.tensor<[seq, seq], bool>
// CHECK-NEXT: %5 = ix.constant {value = -1.000000e+30 : f64} : !ix.tensor<[1, 1, seq, seq], f32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @constants() {
  %0 = ix.constant {value = 1.000000e+00 : f32} : !ix.tensor<[], f32>
  %1 = ix.constant {value = -0.5 : f64} : !ix.tensor<[batch, seq, 64], bf16>
  %2 = ix.constant {value = 0 : i64} : !ix.tensor<[batch, seq + 1], i32>
  %3 = ix.constant {value = 2 : i64} : !ix.tensor<[seq floordiv 2], f16>
  %4 = ix.constant {value = 1 : i64} : !ix.tensor<[seq, seq], bool>
  %5 = ix.constant {value = -1.0e+30 : f64} : !ix.tensor<[1, 1, seq, seq], f32>
  func.return
}
