// ix.embedding gathers rows of table[vocab, hidden] by integer ids of any shape.
// RUN: inferx opt %s | filecheck %s
// RUN: inferx opt %s > %t && inferx opt %t > %t.2 && diff %t %t.2

// CHECK-LABEL: func.func @embeddings(
// CHECK-SAME: %ids: !ix.tensor<[batch, seq], i64>, %flat: !ix.tensor<[batch * seq], i32>, %one: !ix.tensor<[], i32>) {
// CHECK-NEXT: %t = ix.weight {name = "embed"} : !ix.tensor<[49152, 576], bf16>
// CHECK-NEXT: %0 = ix.embedding %t, %ids : (!ix.tensor<[49152, 576], bf16>, !ix.tensor<[batch, seq], i64>) -> !ix.tensor<[batch, seq, 576], bf16>
// CHECK-NEXT: %1 = ix.embedding %t, %flat : (!ix.tensor<[49152, 576], bf16>, !ix.tensor<[batch * seq], i32>) -> !ix.tensor<[batch * seq, 576], bf16>
// CHECK-NEXT: %2 = ix.embedding %t, %one : (!ix.tensor<[49152, 576], bf16>, !ix.tensor<[], i32>) -> !ix.tensor<[576], bf16>
// CHECK-NEXT: func.return
// CHECK-NEXT: }
func.func @embeddings(%ids: !ix.tensor<[batch, seq], i64>, %flat: !ix.tensor<[batch * seq], i32>, %one: !ix.tensor<[], i32>) {
  %t = ix.weight {name = "embed"} : !ix.tensor<[49152, 576], bf16>
  %0 = ix.embedding %t, %ids : (!ix.tensor<[49152, 576], bf16>, !ix.tensor<[batch, seq], i64>) -> !ix.tensor<[batch, seq, 576], bf16>
  %1 = ix.embedding %t, %flat : (!ix.tensor<[49152, 576], bf16>, !ix.tensor<[batch * seq], i32>) -> !ix.tensor<[batch * seq, 576], bf16>
  %2 = ix.embedding %t, %one : (!ix.tensor<[49152, 576], bf16>, !ix.tensor<[], i32>) -> !ix.tensor<[576], bf16>
  func.return
}
