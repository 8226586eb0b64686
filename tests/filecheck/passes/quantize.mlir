// RUN: inferx opt %s -p 'quantize{scheme=int4-g32},dce' | filecheck %s
// RUN: inferx opt %s -p 'quantize{scheme=int4-g64-sym head=true exclude="*v_proj*"},dce' | filecheck %s --check-prefix=SYM
// RUN: inferx opt %s -p 'quantize{scheme=int4-g32 overrides="*v_proj*=float,*up_proj*=int4-g64"},dce' | filecheck %s --check-prefix=OVR
// RUN: not inferx opt %s -p 'quantize{scheme=int4-g32 overrides="*v_proj*"}' 2>&1 | filecheck %s --check-prefix=BADOVR
// RUN: not inferx opt %s -p 'quantize{scheme=int4-g128}' 2>&1 | filecheck %s --check-prefix=UNFIT
// RUN: not inferx opt %s -p 'quantize{scheme=int8-g128}' 2>&1 | filecheck %s --check-prefix=UNKNOWN

// A linear's weight becomes codes, group scales and (asymmetric) group minimums, named after it;
// the LM head stays float unless head=true; a bias stays float (the qlinear's bias operand); a
// weight in the kn layout ([K, N]) gets codes, scales and minimums of its transpose ([N, K]).
// CHECK-LABEL: func.func @f
// CHECK-NEXT: %h = ix.weight {name = "lm_head.weight"} : !ix.tensor<[96, 64], bf16>
// CHECK-NEXT: %b = ix.weight {name = "bias"} : !ix.tensor<[128], bf16>
// CHECK-NEXT: %[[C:.*]] = ix.weight {name = "model.layers.0.mlp.up_proj.weight.int4-g32.codes"} : !ix.tensor<[128, 64], i4>
// CHECK-NEXT: %[[S:.*]] = ix.weight {name = "model.layers.0.mlp.up_proj.weight.int4-g32.scales"} : !ix.tensor<[128, 2], bf16>
// CHECK-NEXT: %[[M:.*]] = ix.weight {name = "model.layers.0.mlp.up_proj.weight.int4-g32.mins"} : !ix.tensor<[128, 2], bf16>
// CHECK-NEXT: %{{.*}} = ix.qlinear %x, %[[C]], %[[S]] mins %[[M]] {group = 32 : i64}
// CHECK-NEXT: ix.linear %x, %h :
// CHECK: ix.qlinear %x, %{{.*}}, %{{.*}} mins %{{.*}} {group = 32 : i64} : {{.*}} -> !ix.tensor<[batch, seq, 32], bf16>
// CHECK: ix.qlinear %x, %{{.*}}, %{{.*}} mins %{{.*}} bias %b {group = 32 : i64} : {{.*}} -> !ix.tensor<[batch, seq, 128], bf16>
// CHECK-NEXT: %[[KC:.*]] = ix.weight {name = "kn.int4-g32.codes"} : !ix.tensor<[32, 64], i4>
// CHECK-NEXT: %[[KS:.*]] = ix.weight {name = "kn.int4-g32.scales"} : !ix.tensor<[32, 2], bf16>
// CHECK-NEXT: %[[KM:.*]] = ix.weight {name = "kn.int4-g32.mins"} : !ix.tensor<[32, 2], bf16>
// CHECK-NEXT: ix.qlinear %x, %[[KC]], %[[KS]] mins %[[KM]] {group = 32 : i64} : {{.*}} -> !ix.tensor<[batch, seq, 32], bf16>
// CHECK-NOT:  ix.linear

// SYM-LABEL: func.func @f
// SYM: ix.qlinear %x, %{{.*}}, %{{.*}} {group = 64 : i64} : {{.*}} -> !ix.tensor<[batch, seq, 128], bf16>
// SYM: ix.qlinear %x, %{{.*}}, %{{.*}} {group = 64 : i64} : {{.*}} -> !ix.tensor<[batch, seq, 96], bf16>
// SYM: ix.linear %x, %{{.*}} : {{.*}} -> !ix.tensor<[batch, seq, 32], bf16>

// Per-layer overrides, the first match winning: v_proj kept float, up_proj (the weight %w, and
// its biased use) in groups of 64, the rest under the scheme.
// OVR-LABEL: func.func @f
// OVR: ix.qlinear %x, %{{.*}}, %{{.*}} mins %{{.*}} {group = 64 : i64} : {{.*}} -> !ix.tensor<[batch, seq, 128], bf16>
// OVR-NEXT: ix.linear %x, %h :
// OVR-NEXT: ix.linear %x, %v :
// OVR: ix.qlinear %x, %{{.*}}, %{{.*}} mins %{{.*}} bias %b {group = 64 : i64}
// OVR: ix.qlinear %x, %{{.*}}, %{{.*}} mins %{{.*}} {group = 32 : i64} : {{.*}} -> !ix.tensor<[batch, seq, 32], bf16>

// BADOVR: error: quantize: override '*v_proj*': write it PATTERN=SCHEME

// UNFIT: error: quantize: model.layers.0.mlp.up_proj.weight: K = 64 is not a multiple of the group size 128 (int4-g128); try a group of 32, 64
// UNKNOWN: error: quantize: unknown quantization scheme 'int8-g128'
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
