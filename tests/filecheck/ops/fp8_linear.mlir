// ix.fp8_linear: x[..., K] times an FP8 weight [N, K] given as E4M3 codes and one f32 scale per
// output channel, x quantized per token (or by a static x_scale [1]); an optional bias [N].
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @fp8_linears(
// CHECK: %0 = ix.fp8_linear %x, %c, %s : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[16, 64], f8e4m3>, !ix.tensor<[16], f32> -> !ix.tensor<[batch, seq, 16], bf16>
// CHECK-NEXT: %1 = ix.fp8_linear %v, %c, %s bias %b : !ix.tensor<[64], bf16>, !ix.tensor<[16, 64], f8e4m3>, !ix.tensor<[16], f32> bias !ix.tensor<[16], bf16> -> !ix.tensor<[16], bf16>
// CHECK-NEXT: %2 = ix.fp8_linear %v, %c, %s bias %b x_scale %xs : !ix.tensor<[64], bf16>, !ix.tensor<[16, 64], f8e4m3>, !ix.tensor<[16], f32> bias !ix.tensor<[16], bf16> x_scale !ix.tensor<[1], f32> -> !ix.tensor<[16], bf16>
// CHECK-NEXT: %3 = ix.fp8_linear %x, %c, %s x_scale %xs : {{.*}} -> !ix.tensor<[batch, seq, 16], bf16>
// CHECK-NEXT: func.return
func.func @fp8_linears(%x: !ix.tensor<[batch, seq, 64], bf16>, %v: !ix.tensor<[64], bf16>) {
  %c = ix.weight {name = "c"} : !ix.tensor<[16, 64], f8e4m3>
  %s = ix.weight {name = "s"} : !ix.tensor<[16], f32>
  %b = ix.weight {name = "b"} : !ix.tensor<[16], bf16>
  %xs = ix.weight {name = "xs"} : !ix.tensor<[1], f32>
  %0 = ix.fp8_linear %x, %c, %s : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[16, 64], f8e4m3>, !ix.tensor<[16], f32> -> !ix.tensor<[batch, seq, 16], bf16>
  %1 = ix.fp8_linear %v, %c, %s bias %b : !ix.tensor<[64], bf16>, !ix.tensor<[16, 64], f8e4m3>, !ix.tensor<[16], f32> bias !ix.tensor<[16], bf16> -> !ix.tensor<[16], bf16>
  %2 = ix.fp8_linear %v, %c, %s bias %b x_scale %xs : !ix.tensor<[64], bf16>, !ix.tensor<[16, 64], f8e4m3>, !ix.tensor<[16], f32> bias !ix.tensor<[16], bf16> x_scale !ix.tensor<[1], f32> -> !ix.tensor<[16], bf16>
  %3 = ix.fp8_linear %x, %c, %s x_scale %xs : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[16, 64], f8e4m3>, !ix.tensor<[16], f32> x_scale !ix.tensor<[1], f32> -> !ix.tensor<[batch, seq, 16], bf16>
  func.return
}
