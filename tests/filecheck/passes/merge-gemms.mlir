// RUN: inferx opt %s -p merge-gemms,dce --split-input-file | filecheck %s

// Three linears of one input become one linear over the concatenated weights, then a split.
// CHECK-LABEL: func.func @qkv
// CHECK:      %[[WQ:.*]] = ix.weight {name = "q"} : !ix.tensor<[8, 16], f32>
// CHECK-NEXT: %[[WK:.*]] = ix.weight {name = "k"} : !ix.tensor<[4, 16], f32>
// CHECK-NEXT: %[[WV:.*]] = ix.weight {name = "v"} : !ix.tensor<[4, 16], f32>
// CHECK-NEXT: %[[W:.*]] = ix.concat %[[WQ]], %[[WK]], %[[WV]] {dim = 0 : i64} : {{.*}} -> !ix.tensor<[16, 16], f32>
// CHECK-NEXT: %[[L:.*]] = ix.linear %x, %[[W]] : !ix.tensor<[batch, 16], f32>, !ix.tensor<[16, 16], f32> -> !ix.tensor<[batch, 16], f32>
// CHECK-NEXT: %[[S:.*]], %[[S1:.*]], %[[S2:.*]] = ix.split %[[L]] {dim = -1 : i64} : (!ix.tensor<[batch, 16], f32>) -> (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>)
// CHECK-NEXT: func.return %[[S]], %[[S1]], %[[S2]]
func.func @qkv(%x: !ix.tensor<[batch, 16], f32>) -> (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>) {
  %wq = ix.weight {name = "q"} : !ix.tensor<[8, 16], f32>
  %q = ix.linear %x, %wq : !ix.tensor<[batch, 16], f32>, !ix.tensor<[8, 16], f32> -> !ix.tensor<[batch, 8], f32>
  %wk = ix.weight {name = "k"} : !ix.tensor<[4, 16], f32>
  %k = ix.linear %x, %wk : !ix.tensor<[batch, 16], f32>, !ix.tensor<[4, 16], f32> -> !ix.tensor<[batch, 4], f32>
  %wv = ix.weight {name = "v"} : !ix.tensor<[4, 16], f32>
  %v = ix.linear %x, %wv : !ix.tensor<[batch, 16], f32>, !ix.tensor<[4, 16], f32> -> !ix.tensor<[batch, 4], f32>
  func.return %q, %k, %v : !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>
}

// -----

// Negative: a "kn" weight, a lone linear, and linears of different inputs are left alone.
// CHECK-LABEL: func.func @no_merge
// CHECK-NOT:  ix.concat
// CHECK-NOT:  ix.split
// CHECK-COUNT-3: ix.linear
// CHECK-NOT:  ix.linear
func.func @no_merge(%x: !ix.tensor<[batch, 16], f32>, %y: !ix.tensor<[batch, 16], f32>) -> (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 8], f32>) {
  %w1 = ix.weight {name = "w1"} : !ix.tensor<[8, 16], f32>
  %a = ix.linear %x, %w1 : !ix.tensor<[batch, 16], f32>, !ix.tensor<[8, 16], f32> -> !ix.tensor<[batch, 8], f32>
  %w2 = ix.weight {name = "w2"} : !ix.tensor<[16, 8], f32>
  %b = ix.linear %x, %w2 {w_layout = "kn"} : !ix.tensor<[batch, 16], f32>, !ix.tensor<[16, 8], f32> -> !ix.tensor<[batch, 8], f32>
  %c = ix.linear %y, %w1 : !ix.tensor<[batch, 16], f32>, !ix.tensor<[8, 16], f32> -> !ix.tensor<[batch, 8], f32>
  func.return %a, %b, %c : !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 8], f32>
}

// -----

// Quantized linears of one input, of one group and all with mins: codes, scales and mins
// concatenated along N (groups run along K), one qlinear, then a split.
// CHECK-LABEL: func.func @qlinears
// CHECK:      %[[CQ:.*]] = ix.weight {name = "q.codes"} : !ix.tensor<[8, 64], i4>
// CHECK-NEXT: %[[CK:.*]] = ix.weight {name = "k.codes"} : !ix.tensor<[4, 64], i4>
// CHECK-NEXT: %[[C:.*]] = ix.concat %[[CQ]], %[[CK]] {dim = 0 : i64} : {{.*}} -> !ix.tensor<[12, 64], i4>
// CHECK-NEXT: %[[SQ:.*]] = ix.weight {name = "q.scales"} : !ix.tensor<[8, 2], f32>
// CHECK-NEXT: %[[SK:.*]] = ix.weight {name = "k.scales"} : !ix.tensor<[4, 2], f32>
// CHECK-NEXT: %[[S:.*]] = ix.concat %[[SQ]], %[[SK]] {dim = 0 : i64} : {{.*}} -> !ix.tensor<[12, 2], f32>
// CHECK-NEXT: %[[MQ:.*]] = ix.weight {name = "q.mins"} : !ix.tensor<[8, 2], f32>
// CHECK-NEXT: %[[MK:.*]] = ix.weight {name = "k.mins"} : !ix.tensor<[4, 2], f32>
// CHECK-NEXT: %[[M:.*]] = ix.concat %[[MQ]], %[[MK]] {dim = 0 : i64} : {{.*}} -> !ix.tensor<[12, 2], f32>
// CHECK-NEXT: %[[L:.*]] = ix.qlinear %x, %[[C]], %[[S]] mins %[[M]] {group = 32 : i64} : {{.*}} -> !ix.tensor<[batch, 12], f32>
// CHECK-NEXT: %[[A:.*]], %[[B:.*]] = ix.split %[[L]] {dim = -1 : i64} : (!ix.tensor<[batch, 12], f32>) -> (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>)
// CHECK-NEXT: func.return %[[A]], %[[B]]
func.func @qlinears(%x: !ix.tensor<[batch, 64], f32>) -> (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>) {
  %cq = ix.weight {name = "q.codes"} : !ix.tensor<[8, 64], i4>
  %sq = ix.weight {name = "q.scales"} : !ix.tensor<[8, 2], f32>
  %mq = ix.weight {name = "q.mins"} : !ix.tensor<[8, 2], f32>
  %q = ix.qlinear %x, %cq, %sq mins %mq {group = 32 : i64} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[8, 64], i4>, !ix.tensor<[8, 2], f32> mins !ix.tensor<[8, 2], f32> -> !ix.tensor<[batch, 8], f32>
  %ck = ix.weight {name = "k.codes"} : !ix.tensor<[4, 64], i4>
  %sk = ix.weight {name = "k.scales"} : !ix.tensor<[4, 2], f32>
  %mk = ix.weight {name = "k.mins"} : !ix.tensor<[4, 2], f32>
  %k = ix.qlinear %x, %ck, %sk mins %mk {group = 32 : i64} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[4, 64], i4>, !ix.tensor<[4, 2], f32> mins !ix.tensor<[4, 2], f32> -> !ix.tensor<[batch, 4], f32>
  func.return %q, %k : !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>
}

// -----

// One column scale shared by both (the same SSA value): merged, and the merged qlinear reads it.
// CHECK-LABEL: func.func @qlinears_one_col_scale
// CHECK:      %[[CS:.*]] = ix.weight {name = "x.col_scale"}
// CHECK:      %[[L:.*]] = ix.qlinear %x, %{{.*}}, %{{.*}} col_scale %[[CS]] {group = 32 : i64} : {{.*}} -> !ix.tensor<[batch, 12], f32>
// CHECK-NEXT: ix.split %[[L]]
// CHECK-NOT:  ix.qlinear
func.func @qlinears_one_col_scale(%x: !ix.tensor<[batch, 64], f32>) -> (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>) {
  %cs = ix.weight {name = "x.col_scale"} : !ix.tensor<[64], f32>
  %cq = ix.weight {name = "q.codes"} : !ix.tensor<[8, 64], i4>
  %sq = ix.weight {name = "q.scales"} : !ix.tensor<[8, 2], f32>
  %q = ix.qlinear %x, %cq, %sq col_scale %cs {group = 32 : i64} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[8, 64], i4>, !ix.tensor<[8, 2], f32> col_scale !ix.tensor<[64], f32> -> !ix.tensor<[batch, 8], f32>
  %ck = ix.weight {name = "k.codes"} : !ix.tensor<[4, 64], i4>
  %sk = ix.weight {name = "k.scales"} : !ix.tensor<[4, 2], f32>
  %k = ix.qlinear %x, %ck, %sk col_scale %cs {group = 32 : i64} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[4, 64], i4>, !ix.tensor<[4, 2], f32> col_scale !ix.tensor<[64], f32> -> !ix.tensor<[batch, 4], f32>
  func.return %q, %k : !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>
}

// -----

// Negative: qlinears of different groups, of different column scales, one with mins and one
// without, and a qlinear beside a linear are left alone.
// CHECK-LABEL: func.func @qlinears_no_merge
// CHECK-NOT:  ix.concat
// CHECK-NOT:  ix.split
func.func @qlinears_no_merge(%x: !ix.tensor<[batch, 64], f32>) -> (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>) {
  %c1 = ix.weight {name = "a.codes"} : !ix.tensor<[8, 64], i4>
  %s1 = ix.weight {name = "a.scales"} : !ix.tensor<[8, 2], f32>
  %a = ix.qlinear %x, %c1, %s1 {group = 32 : i64} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[8, 64], i4>, !ix.tensor<[8, 2], f32> -> !ix.tensor<[batch, 8], f32>
  %c2 = ix.weight {name = "b.codes"} : !ix.tensor<[4, 64], i4>
  %s2 = ix.weight {name = "b.scales"} : !ix.tensor<[4, 1], f32>
  %b = ix.qlinear %x, %c2, %s2 {group = 64 : i64} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[4, 64], i4>, !ix.tensor<[4, 1], f32> -> !ix.tensor<[batch, 4], f32>
  %cs1 = ix.weight {name = "c.col_scale"} : !ix.tensor<[64], f32>
  %c3 = ix.weight {name = "c.codes"} : !ix.tensor<[8, 64], i4>
  %s3 = ix.weight {name = "c.scales"} : !ix.tensor<[8, 1], f32>
  %c = ix.qlinear %x, %c3, %s3 col_scale %cs1 {group = 64 : i64} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[8, 64], i4>, !ix.tensor<[8, 1], f32> col_scale !ix.tensor<[64], f32> -> !ix.tensor<[batch, 8], f32>
  %cs2 = ix.weight {name = "d.col_scale"} : !ix.tensor<[64], f32>
  %c4 = ix.weight {name = "d.codes"} : !ix.tensor<[4, 64], i4>
  %s4 = ix.weight {name = "d.scales"} : !ix.tensor<[4, 1], f32>
  %d = ix.qlinear %x, %c4, %s4 col_scale %cs2 {group = 64 : i64} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[4, 64], i4>, !ix.tensor<[4, 1], f32> col_scale !ix.tensor<[64], f32> -> !ix.tensor<[batch, 4], f32>
  %c5 = ix.weight {name = "e.codes"} : !ix.tensor<[4, 64], i4>
  %s5 = ix.weight {name = "e.scales"} : !ix.tensor<[4, 2], f32>
  %m5 = ix.weight {name = "e.mins"} : !ix.tensor<[4, 2], f32>
  %e = ix.qlinear %x, %c5, %s5 mins %m5 {group = 32 : i64} : !ix.tensor<[batch, 64], f32>, !ix.tensor<[4, 64], i4>, !ix.tensor<[4, 2], f32> mins !ix.tensor<[4, 2], f32> -> !ix.tensor<[batch, 4], f32>
  %w6 = ix.weight {name = "f"} : !ix.tensor<[4, 64], f32>
  %f = ix.linear %x, %w6 : !ix.tensor<[batch, 64], f32>, !ix.tensor<[4, 64], f32> -> !ix.tensor<[batch, 4], f32>
  func.return %a, %b, %c, %d, %e, %f : !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>
}

// -----

// FP8 linears of one input: codes and channel scales concatenated along N, one fp8_linear (x's
// per-token scale is the same for every part), then a split; one with a bias beside one without
// stays apart.
// CHECK-LABEL: func.func @fp8_linears
// CHECK:      %[[CQ:.*]] = ix.weight {name = "q.fp8.codes"} : !ix.tensor<[8, 64], f8e4m3>
// CHECK-NEXT: %[[CK:.*]] = ix.weight {name = "k.fp8.codes"} : !ix.tensor<[4, 64], f8e4m3>
// CHECK-NEXT: %[[C:.*]] = ix.concat %[[CQ]], %[[CK]] {dim = 0 : i64} : {{.*}} -> !ix.tensor<[12, 64], f8e4m3>
// CHECK-NEXT: %[[SQ:.*]] = ix.weight {name = "q.fp8.scales"} : !ix.tensor<[8], f32>
// CHECK-NEXT: %[[SK:.*]] = ix.weight {name = "k.fp8.scales"} : !ix.tensor<[4], f32>
// CHECK-NEXT: %[[S:.*]] = ix.concat %[[SQ]], %[[SK]] {dim = 0 : i64} : {{.*}} -> !ix.tensor<[12], f32>
// CHECK-NEXT: %[[L:.*]] = ix.fp8_linear %x, %[[C]], %[[S]] : {{.*}} -> !ix.tensor<[batch, 12], f32>
// CHECK-NEXT: %[[A:.*]], %[[B:.*]] = ix.split %[[L]] {dim = -1 : i64}
// CHECK:      ix.fp8_linear %x, %{{.*}}, %{{.*}} bias
// CHECK-NOT:  ix.concat
func.func @fp8_linears(%x: !ix.tensor<[batch, 64], f32>) -> (!ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>) {
  %cq = ix.weight {name = "q.fp8.codes"} : !ix.tensor<[8, 64], f8e4m3>
  %sq = ix.weight {name = "q.fp8.scales"} : !ix.tensor<[8], f32>
  %q = ix.fp8_linear %x, %cq, %sq : !ix.tensor<[batch, 64], f32>, !ix.tensor<[8, 64], f8e4m3>, !ix.tensor<[8], f32> -> !ix.tensor<[batch, 8], f32>
  %ck = ix.weight {name = "k.fp8.codes"} : !ix.tensor<[4, 64], f8e4m3>
  %sk = ix.weight {name = "k.fp8.scales"} : !ix.tensor<[4], f32>
  %k = ix.fp8_linear %x, %ck, %sk : !ix.tensor<[batch, 64], f32>, !ix.tensor<[4, 64], f8e4m3>, !ix.tensor<[4], f32> -> !ix.tensor<[batch, 4], f32>
  %cv = ix.weight {name = "v.fp8.codes"} : !ix.tensor<[4, 64], f8e4m3>
  %sv = ix.weight {name = "v.fp8.scales"} : !ix.tensor<[4], f32>
  %bv = ix.weight {name = "v.bias"} : !ix.tensor<[4], f32>
  %v = ix.fp8_linear %x, %cv, %sv bias %bv : !ix.tensor<[batch, 64], f32>, !ix.tensor<[4, 64], f8e4m3>, !ix.tensor<[4], f32> bias !ix.tensor<[4], f32> -> !ix.tensor<[batch, 4], f32>
  func.return %q, %k, %v : !ix.tensor<[batch, 8], f32>, !ix.tensor<[batch, 4], f32>, !ix.tensor<[batch, 4], f32>
}
