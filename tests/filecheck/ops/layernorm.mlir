// ix.layernorm over the last dim; weight and bias are each optional.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @layernorms(
// CHECK-SAME: %x: !ix.tensor<[batch, seq, 768], f32>) {
// CHECK-NEXT: %w = ix.weight {name = "ln.weight"} : !ix.tensor<[768], f32>
// CHECK-NEXT: %b = ix.weight {name = "ln.bias"} : !ix.tensor<[768], f32>
// CHECK-NEXT: %0 = ix.layernorm %x weight %w bias %b {eps = 1.000000e-05 : f64} : !ix.tensor<[batch, seq, 768], f32> weight !ix.tensor<[768], f32> bias !ix.tensor<[768], f32> -> !ix.tensor<[batch, seq, 768], f32>
// CHECK-NEXT: %1 = ix.layernorm %x weight %w {eps = 1.000000e-05 : f64} : !ix.tensor<[batch, seq, 768], f32> weight !ix.tensor<[768], f32> -> !ix.tensor<[batch, seq, 768], f32>
// CHECK-NEXT: %2 = ix.layernorm %x bias %b {eps = 1.000000e-05 : f64} : !ix.tensor<[batch, seq, 768], f32> bias !ix.tensor<[768], f32> -> !ix.tensor<[batch, seq, 768], f32>
// CHECK-NEXT: %3 = ix.layernorm %x {eps = 1.000000e-06 : f64} : !ix.tensor<[batch, seq, 768], f32> -> !ix.tensor<[batch, seq, 768], f32>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @layernorms(%x: !ix.tensor<[batch, seq, 768], f32>) {
  %w = ix.weight {name = "ln.weight"} : !ix.tensor<[768], f32>
  %b = ix.weight {name = "ln.bias"} : !ix.tensor<[768], f32>
  %0 = ix.layernorm %x weight %w bias %b {eps = 1.000000e-05 : f64} : !ix.tensor<[batch, seq, 768], f32> weight !ix.tensor<[768], f32> bias !ix.tensor<[768], f32> -> !ix.tensor<[batch, seq, 768], f32>
  %1 = ix.layernorm %x weight %w {eps = 1.000000e-05 : f64} : !ix.tensor<[batch, seq, 768], f32> weight !ix.tensor<[768], f32> -> !ix.tensor<[batch, seq, 768], f32>
  %2 = ix.layernorm %x bias %b {eps = 1.000000e-05 : f64} : !ix.tensor<[batch, seq, 768], f32> bias !ix.tensor<[768], f32> -> !ix.tensor<[batch, seq, 768], f32>
  %3 = ix.layernorm %x {eps = 1.000000e-06 : f64} : !ix.tensor<[batch, seq, 768], f32> -> !ix.tensor<[batch, seq, 768], f32>
  func.return
}

// CHECK-LABEL: func.func @symbolic_hidden(
// CHECK-SAME: %x: !ix.tensor<[seq, hidden], bf16>, %w: !ix.tensor<[hidden], bf16>) -> !ix.tensor<[seq, hidden], bf16> {
// CHECK-NEXT: %0 = ix.layernorm %x weight %w {eps = 1.000000e-05 : f64} : !ix.tensor<[seq, hidden], bf16> weight !ix.tensor<[hidden], bf16> -> !ix.tensor<[seq, hidden], bf16>
// CHECK-NEXT: func.return %0 : !ix.tensor<[seq, hidden], bf16>
// CHECK-NEXT: }
func.func @symbolic_hidden(%x: !ix.tensor<[seq, hidden], bf16>, %w: !ix.tensor<[hidden], bf16>) -> !ix.tensor<[seq, hidden], bf16> {
  %0 = ix.layernorm %x weight %w {eps = 1.000000e-05 : f64} : !ix.tensor<[seq, hidden], bf16> weight !ix.tensor<[hidden], bf16> -> !ix.tensor<[seq, hidden], bf16>
  func.return %0 : !ix.tensor<[seq, hidden], bf16>
}
