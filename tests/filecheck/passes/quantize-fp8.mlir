// RUN: inferx opt %s -p 'quantize-fp8,dce' | filecheck %s
// RUN: inferx opt %s -p 'quantize-fp8{head=true exclude="*v_proj*"},dce' | filecheck %s --check-prefix=HEAD

// A linear's weight becomes E4M3 codes [N, K] and one f32 scale per output channel, named after
// it; the LM head stays float unless head=true; a bias stays float (the op's bias operand); a
// weight in the kn layout ([K, N], GPT-2's Conv1D) is quantized per output channel and stored
// transposed, as codes [N, K].
// CHECK-LABEL: func.func @f
// CHECK-NEXT: %h = ix.weight {name = "lm_head.weight"} : !ix.tensor<[96, 64], bf16>
// CHECK-NEXT: %b = ix.weight {name = "bias"} : !ix.tensor<[128], bf16>
// CHECK-NEXT: %[[C:.*]] = ix.weight {name = "model.layers.0.mlp.up_proj.weight.fp8.codes"} : !ix.tensor<[128, 64], f8e4m3>
// CHECK-NEXT: %[[S:.*]] = ix.weight {name = "model.layers.0.mlp.up_proj.weight.fp8.scales"} : !ix.tensor<[128], f32>
// CHECK-NEXT: %{{.*}} = ix.fp8_linear %x, %[[C]], %[[S]] : {{.*}} -> !ix.tensor<[batch, seq, 128], bf16>
// CHECK-NEXT: ix.linear %x, %h :
// CHECK: ix.fp8_linear %x, %{{.*}}, %{{.*}} : {{.*}} -> !ix.tensor<[batch, seq, 32], bf16>
// CHECK: ix.fp8_linear %x, %{{.*}}, %{{.*}} bias %b : {{.*}} -> !ix.tensor<[batch, seq, 128], bf16>
// CHECK: ix.weight {name = "kn.fp8.codes"} : !ix.tensor<[32, 64], f8e4m3>
// CHECK: ix.fp8_linear %x, %{{.*}}, %{{.*}} : {{.*}} -> !ix.tensor<[batch, seq, 32], bf16>
// CHECK-NOT: w_layout

// HEAD-LABEL: func.func @f
// HEAD: ix.fp8_linear %x, %{{.*}}, %{{.*}} : {{.*}} -> !ix.tensor<[batch, seq, 96], bf16>
// HEAD: ix.linear %x, %v :
func.func @f(%x: !ix.tensor<[batch, seq, 64], bf16>) -> (!ix.tensor<[batch, seq, 128], bf16>, !ix.tensor<[batch, seq, 96], bf16>, !ix.tensor<[batch, seq, 32], bf16>, !ix.tensor<[batch, seq, 128], bf16>, !ix.tensor<[batch, seq, 32], bf16>) {
  %w = ix.weight {name = "model.layers.0.mlp.up_proj.weight"} : !ix.tensor<[128, 64], bf16>
  %h = ix.weight {name = "lm_head.weight"} : !ix.tensor<[96, 64], bf16>
  %v = ix.weight {name = "model.layers.0.self_attn.v_proj.weight"} : !ix.tensor<[32, 64], bf16>
  %b = ix.weight {name = "bias"} : !ix.tensor<[128], bf16>
  %kn = ix.weight {name = "kn"} : !ix.tensor<[64, 32], bf16>
  %0 = ix.linear %x, %w : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[128, 64], bf16> -> !ix.tensor<[batch, seq, 128], bf16>
  %1 = ix.linear %x, %h : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[96, 64], bf16> -> !ix.tensor<[batch, seq, 96], bf16>
  %2 = ix.linear %x, %v : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[32, 64], bf16> -> !ix.tensor<[batch, seq, 32], bf16>
  %3 = ix.linear %x, %w bias %b : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[128, 64], bf16> bias !ix.tensor<[128], bf16> -> !ix.tensor<[batch, seq, 128], bf16>
  %4 = ix.linear %x, %kn {w_layout = "kn"} : !ix.tensor<[batch, seq, 64], bf16>, !ix.tensor<[64, 32], bf16> -> !ix.tensor<[batch, seq, 32], bf16>
  func.return %0, %1, %2, %3, %4 : !ix.tensor<[batch, seq, 128], bf16>, !ix.tensor<[batch, seq, 96], bf16>, !ix.tensor<[batch, seq, 32], bf16>, !ix.tensor<[batch, seq, 128], bf16>, !ix.tensor<[batch, seq, 32], bf16>
}
