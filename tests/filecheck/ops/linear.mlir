// ix.linear: x[..., K] times a weight in "nk" (default, printed only when stated) or "kn" layout,
// with an optional bias[N].
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @linears(
// CHECK-SAME: %x: !ix.tensor<[batch, seq, 576], bf16>, %flat: !ix.tensor<[batch * seq, 576], bf16>, %v: !ix.tensor<[576], bf16>) {
// CHECK-NEXT: %w = ix.weight {name = "w"} : !ix.tensor<[1536, 576], bf16>
// CHECK-NEXT: %wt = ix.weight {name = "wt"} : !ix.tensor<[576, 1536], bf16>
// CHECK-NEXT: %b = ix.weight {name = "b"} : !ix.tensor<[1536], bf16>
// CHECK-NEXT: %0 = ix.linear %x, %w : !ix.tensor<[batch, seq, 576], bf16>, !ix.tensor<[1536, 576], bf16> -> !ix.tensor<[batch, seq, 1536], bf16>
// CHECK-NEXT: %1 = ix.linear %x, %w bias %b : !ix.tensor<[batch, seq, 576], bf16>, !ix.tensor<[1536, 576], bf16> bias !ix.tensor<[1536], bf16> -> !ix.tensor<[batch, seq, 1536], bf16>
// CHECK-NEXT: %2 = ix.linear %x, %wt {w_layout = "kn"} : !ix.tensor<[batch, seq, 576], bf16>, !ix.tensor<[576, 1536], bf16> -> !ix.tensor<[batch, seq, 1536], bf16>
// CHECK-NEXT: %3 = ix.linear %flat, %wt bias %b {w_layout = "kn"} : !ix.tensor<[batch * seq, 576], bf16>, !ix.tensor<[576, 1536], bf16> bias !ix.tensor<[1536], bf16> -> !ix.tensor<[batch * seq, 1536], bf16>
// CHECK-NEXT: %4 = ix.linear %x, %w {w_layout = "nk"} : !ix.tensor<[batch, seq, 576], bf16>, !ix.tensor<[1536, 576], bf16> -> !ix.tensor<[batch, seq, 1536], bf16>
// CHECK-NEXT: %5 = ix.linear %v, %w : !ix.tensor<[576], bf16>, !ix.tensor<[1536, 576], bf16> -> !ix.tensor<[1536], bf16>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @linears(%x: !ix.tensor<[batch, seq, 576], bf16>, %flat: !ix.tensor<[batch * seq, 576], bf16>, %v: !ix.tensor<[576], bf16>) {
  %w = ix.weight {name = "w"} : !ix.tensor<[1536, 576], bf16>
  %wt = ix.weight {name = "wt"} : !ix.tensor<[576, 1536], bf16>
  %b = ix.weight {name = "b"} : !ix.tensor<[1536], bf16>
  %0 = ix.linear %x, %w : !ix.tensor<[batch, seq, 576], bf16>, !ix.tensor<[1536, 576], bf16> -> !ix.tensor<[batch, seq, 1536], bf16>
  %1 = ix.linear %x, %w bias %b : !ix.tensor<[batch, seq, 576], bf16>, !ix.tensor<[1536, 576], bf16> bias !ix.tensor<[1536], bf16> -> !ix.tensor<[batch, seq, 1536], bf16>
  %2 = ix.linear %x, %wt {w_layout = "kn"} : !ix.tensor<[batch, seq, 576], bf16>, !ix.tensor<[576, 1536], bf16> -> !ix.tensor<[batch, seq, 1536], bf16>
  %3 = ix.linear %flat, %wt bias %b {w_layout = "kn"} : !ix.tensor<[batch * seq, 576], bf16>, !ix.tensor<[576, 1536], bf16> bias !ix.tensor<[1536], bf16> -> !ix.tensor<[batch * seq, 1536], bf16>
  %4 = ix.linear %x, %w {w_layout = "nk"} : !ix.tensor<[batch, seq, 576], bf16>, !ix.tensor<[1536, 576], bf16> -> !ix.tensor<[batch, seq, 1536], bf16>
  %5 = ix.linear %v, %w : !ix.tensor<[576], bf16>, !ix.tensor<[1536, 576], bf16> -> !ix.tensor<[1536], bf16>
  func.return
}
