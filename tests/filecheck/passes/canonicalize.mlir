// canonicalize: each rule of the table fires on its pattern and nowhere else. Ops a rule leaves
// unused stay in place (dce removes them), so the positive tests see them.
// RUN: inferx opt %s -p canonicalize --split-input-file | filecheck %s

// Constant folding of splats: the result is a new ix.constant of the result type.
// CHECK-LABEL: func.func @fold_binary
// CHECK-NEXT:    %a = ix.constant {value = 1.500000e+00 : f32} : !ix.tensor<[4], f32>
// CHECK-NEXT:    %b = ix.constant {value = 2.000000e+00 : f32} : !ix.tensor<[1], f32>
// CHECK-NEXT:    %c = ix.constant {value = 3.500000e+00 : f32} : !ix.tensor<[4], f32>
// CHECK-NEXT:    %d = ix.constant {value = 3.000000e+00 : f32} : !ix.tensor<[4], f32>
// CHECK-NEXT:    %e = ix.constant {value = 2.250000e+00 : f32} : !ix.tensor<[4], f32>
// CHECK-NEXT:    func.return %e : !ix.tensor<[4], f32>
func.func @fold_binary() -> !ix.tensor<[4], f32> {
  %a = ix.constant {value = 1.5 : f32} : !ix.tensor<[4], f32>
  %b = ix.constant {value = 2.0 : f32} : !ix.tensor<[1], f32>
  %c = ix.add %a, %b : (!ix.tensor<[4], f32>, !ix.tensor<[1], f32>) -> !ix.tensor<[4], f32>
  %d = ix.mul %a, %b : (!ix.tensor<[4], f32>, !ix.tensor<[1], f32>) -> !ix.tensor<[4], f32>
  %e = ix.pow %a, %b : (!ix.tensor<[4], f32>, !ix.tensor<[1], f32>) -> !ix.tensor<[4], f32>
  func.return %e : !ix.tensor<[4], f32>
}

// -----

// CHECK-LABEL: func.func @fold_unary_chain
// CHECK-NEXT:    %a = ix.constant {value = 4.000000e+00 : f64} : !ix.tensor<[batch, 8], f16>
// CHECK-NEXT:    %b = ix.constant {value = 2.000000e+00 : f16} : !ix.tensor<[batch, 8], f16>
// CHECK-NEXT:    %c = ix.constant {value = -2.000000e+00 : f16} : !ix.tensor<[batch, 8], f16>
// CHECK-NEXT:    %d = ix.constant {value = 2.000000e+00 : f16} : !ix.tensor<[batch, 8], f16>
// CHECK-NEXT:    func.return %d : !ix.tensor<[batch, 8], f16>
func.func @fold_unary_chain() -> !ix.tensor<[batch, 8], f16> {
  %a = ix.constant {value = 4.0 : f64} : !ix.tensor<[batch, 8], f16>
  %b = ix.sqrt %a : (!ix.tensor<[batch, 8], f16>) -> !ix.tensor<[batch, 8], f16>
  %c = ix.neg %b : (!ix.tensor<[batch, 8], f16>) -> !ix.tensor<[batch, 8], f16>
  %d = ix.max %c, %b : (!ix.tensor<[batch, 8], f16>, !ix.tensor<[batch, 8], f16>) -> !ix.tensor<[batch, 8], f16>
  func.return %d : !ix.tensor<[batch, 8], f16>
}

// -----

// The folded value is rounded to the result's dtype.
// CHECK-LABEL: func.func @fold_rounds_to_dtype
// CHECK-NEXT:    %a = ix.constant {value = 1.000000e+00 : f64} : !ix.tensor<[2], bf16>
// CHECK-NEXT:    %b = ix.constant {value = 2.718750e+00 : bf16} : !ix.tensor<[2], bf16>
// CHECK-NEXT:    %i = ix.constant {value = 7 : i64} : !ix.tensor<[2], i32>
// CHECK-NEXT:    %j = ix.constant {value = -7 : i64} : !ix.tensor<[2], i32>
// CHECK-NEXT:    %k = ix.constant {value = -49 : i64} : !ix.tensor<[2], i32>
// CHECK-NEXT:    func.return %b, %k : !ix.tensor<[2], bf16>, !ix.tensor<[2], i32>
func.func @fold_rounds_to_dtype() -> (!ix.tensor<[2], bf16>, !ix.tensor<[2], i32>) {
  %a = ix.constant {value = 1.0 : f64} : !ix.tensor<[2], bf16>
  %b = ix.exp %a : (!ix.tensor<[2], bf16>) -> !ix.tensor<[2], bf16>
  %i = ix.constant {value = 7 : i64} : !ix.tensor<[2], i32>
  %j = ix.neg %i : (!ix.tensor<[2], i32>) -> !ix.tensor<[2], i32>
  %k = ix.mul %i, %j : (!ix.tensor<[2], i32>, !ix.tensor<[2], i32>) -> !ix.tensor<[2], i32>
  func.return %b, %k : !ix.tensor<[2], bf16>, !ix.tensor<[2], i32>
}

// -----

// Every unary float function folds (values chosen to be exact).
// CHECK-LABEL: func.func @fold_unary_functions
// CHECK-NEXT:    %z = ix.constant {value = 0.000000e+00 : f32} : !ix.tensor<[3], f32>
// CHECK-NEXT:    %four = ix.constant {value = 4.000000e+00 : f32} : !ix.tensor<[3], f32>
// CHECK-NEXT:    %a = ix.constant {value = 0.000000e+00 : f32} : !ix.tensor<[3], f32>
// CHECK-NEXT:    %b = ix.constant {value = 0.000000e+00 : f32} : !ix.tensor<[3], f32>
// CHECK-NEXT:    %c = ix.constant {value = 5.000000e-01 : f32} : !ix.tensor<[3], f32>
// CHECK-NEXT:    %d = ix.constant {value = 0.000000e+00 : f32} : !ix.tensor<[3], f32>
// CHECK-NEXT:    %e = ix.constant {value = 0.000000e+00 : f32} : !ix.tensor<[3], f32>
// CHECK-NEXT:    %f = ix.constant {value = 5.000000e-01 : f32} : !ix.tensor<[3], f32>
// CHECK-NEXT:    %g = ix.constant {value = 1.000000e+00 : f32} : !ix.tensor<[3], f32>
// CHECK-NEXT:    %h = ix.constant {value = 1.250000e-01 : f32} : !ix.tensor<[3], f32>
// CHECK-NEXT:    func.return %a, %b, %c, %d, %e, %f, %g, %h
func.func @fold_unary_functions() -> (!ix.tensor<[3], f32>, !ix.tensor<[3], f32>, !ix.tensor<[3], f32>, !ix.tensor<[3], f32>, !ix.tensor<[3], f32>, !ix.tensor<[3], f32>, !ix.tensor<[3], f32>, !ix.tensor<[3], f32>) {
  %z = ix.constant {value = 0.0 : f32} : !ix.tensor<[3], f32>
  %four = ix.constant {value = 4.0 : f32} : !ix.tensor<[3], f32>
  %a = ix.gelu %z : (!ix.tensor<[3], f32>) -> !ix.tensor<[3], f32>
  %b = ix.gelu %z {approximate = "tanh"} : (!ix.tensor<[3], f32>) -> !ix.tensor<[3], f32>
  %c = ix.sigmoid %z : (!ix.tensor<[3], f32>) -> !ix.tensor<[3], f32>
  %d = ix.silu %z : (!ix.tensor<[3], f32>) -> !ix.tensor<[3], f32>
  %e = ix.tanh %z : (!ix.tensor<[3], f32>) -> !ix.tensor<[3], f32>
  %f = ix.rsqrt %four : (!ix.tensor<[3], f32>) -> !ix.tensor<[3], f32>
  %g = ix.exp %z : (!ix.tensor<[3], f32>) -> !ix.tensor<[3], f32>
  %h = ix.div %f, %four : (!ix.tensor<[3], f32>, !ix.tensor<[3], f32>) -> !ix.tensor<[3], f32>
  func.return %a, %b, %c, %d, %e, %f, %g, %h : !ix.tensor<[3], f32>, !ix.tensor<[3], f32>, !ix.tensor<[3], f32>, !ix.tensor<[3], f32>, !ix.tensor<[3], f32>, !ix.tensor<[3], f32>, !ix.tensor<[3], f32>, !ix.tensor<[3], f32>
}

// -----

// Operands are rounded to the dtype first: 1 + 2^-9 is 1.0 in bf16, so (1 + 2^-9) - 1 is 0.
// CHECK-LABEL: func.func @fold_rounds_operands
// CHECK-NEXT:    %a = ix.constant {value = 1.001953125 : f64} : !ix.tensor<[2], bf16>
// CHECK-NEXT:    %one = ix.constant {value = 1.000000e+00 : bf16} : !ix.tensor<[2], bf16>
// CHECK-NEXT:    %d = ix.constant {value = 0.000000e+00 : bf16} : !ix.tensor<[2], bf16>
// CHECK-NEXT:    func.return %d : !ix.tensor<[2], bf16>
func.func @fold_rounds_operands() -> !ix.tensor<[2], bf16> {
  %a = ix.constant {value = 1.001953125 : f64} : !ix.tensor<[2], bf16>
  %one = ix.constant {value = 1.0 : bf16} : !ix.tensor<[2], bf16>
  %d = ix.sub %a, %one : (!ix.tensor<[2], bf16>, !ix.tensor<[2], bf16>) -> !ix.tensor<[2], bf16>
  func.return %d : !ix.tensor<[2], bf16>
}

// -----

// Not folded: a result that overflows its dtype (exp(20) is past f16's 65504).
// CHECK-LABEL: func.func @no_fold_overflow
// CHECK-NEXT:    %t = ix.constant {value = 2.000000e+01 : f16} : !ix.tensor<[2], f16>
// CHECK-NEXT:    %e = ix.exp %t : (!ix.tensor<[2], f16>) -> !ix.tensor<[2], f16>
func.func @no_fold_overflow() -> !ix.tensor<[2], f16> {
  %t = ix.constant {value = 20.0 : f16} : !ix.tensor<[2], f16>
  %e = ix.exp %t : (!ix.tensor<[2], f16>) -> !ix.tensor<[2], f16>
  func.return %e : !ix.tensor<[2], f16>
}

// -----

// Not folded: an operand that is not a constant, a division by zero, integer division,
// integer overflow, and f8 (no exact rounding).
// CHECK-LABEL: func.func @no_fold
// CHECK-NEXT:    %c = ix.constant {value = 2.000000e+00 : f32} : !ix.tensor<[4], f32>
// CHECK-NEXT:    %z = ix.constant {value = 0.000000e+00 : f32} : !ix.tensor<[4], f32>
// CHECK-NEXT:    %y = ix.add %x, %c : (!ix.tensor<[4], f32>, !ix.tensor<[4], f32>) -> !ix.tensor<[4], f32>
// CHECK-NEXT:    %inf = ix.div %c, %z : (!ix.tensor<[4], f32>, !ix.tensor<[4], f32>) -> !ix.tensor<[4], f32>
// CHECK-NEXT:    %i = ix.constant {value = 7 : i64} : !ix.tensor<[4], i32>
// CHECK-NEXT:    %q = ix.div %i, %i : (!ix.tensor<[4], i32>, !ix.tensor<[4], i32>) -> !ix.tensor<[4], i32>
// CHECK-NEXT:    %big = ix.constant {value = 100 : i64} : !ix.tensor<[4], i8>
// CHECK-NEXT:    %o = ix.mul %big, %big : (!ix.tensor<[4], i8>, !ix.tensor<[4], i8>) -> !ix.tensor<[4], i8>
// CHECK-NEXT:    %f8 = ix.constant {value = 1.000000e+00 : f64} : !ix.tensor<[4], f8e4m3>
// CHECK-NEXT:    %g = ix.exp %f8 : (!ix.tensor<[4], f8e4m3>) -> !ix.tensor<[4], f8e4m3>
func.func @no_fold(%x: !ix.tensor<[4], f32>) -> (!ix.tensor<[4], f32>, !ix.tensor<[4], f32>, !ix.tensor<[4], i32>, !ix.tensor<[4], i8>, !ix.tensor<[4], f8e4m3>) {
  %c = ix.constant {value = 2.0 : f32} : !ix.tensor<[4], f32>
  %z = ix.constant {value = 0.0 : f32} : !ix.tensor<[4], f32>
  %y = ix.add %x, %c : (!ix.tensor<[4], f32>, !ix.tensor<[4], f32>) -> !ix.tensor<[4], f32>
  %inf = ix.div %c, %z : (!ix.tensor<[4], f32>, !ix.tensor<[4], f32>) -> !ix.tensor<[4], f32>
  %i = ix.constant {value = 7 : i64} : !ix.tensor<[4], i32>
  %q = ix.div %i, %i : (!ix.tensor<[4], i32>, !ix.tensor<[4], i32>) -> !ix.tensor<[4], i32>
  %big = ix.constant {value = 100 : i64} : !ix.tensor<[4], i8>
  %o = ix.mul %big, %big : (!ix.tensor<[4], i8>, !ix.tensor<[4], i8>) -> !ix.tensor<[4], i8>
  %f8 = ix.constant {value = 1.0 : f64} : !ix.tensor<[4], f8e4m3>
  %g = ix.exp %f8 : (!ix.tensor<[4], f8e4m3>) -> !ix.tensor<[4], f8e4m3>
  func.return %y, %inf, %q, %o, %g : !ix.tensor<[4], f32>, !ix.tensor<[4], f32>, !ix.tensor<[4], i32>, !ix.tensor<[4], i8>, !ix.tensor<[4], f8e4m3>
}

// -----

// Neutral operands: x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1, x ** 1 -> x; the zero or one may
// have fewer dims than x as long as the result type is x's.
// CHECK-LABEL: func.func @neutral
// CHECK-NEXT:    %zero = ix.constant {value = 0.000000e+00 : f32} : !ix.tensor<[seq, 1], f32>
// CHECK-NEXT:    %one = ix.constant {value = 1 : i64} : !ix.tensor<[64], f32>
// CHECK-NEXT:    func.return %x : !ix.tensor<[batch, seq, 64], f32>
func.func @neutral(%x: !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32> {
  %zero = ix.constant {value = 0.0 : f32} : !ix.tensor<[seq, 1], f32>
  %one = ix.constant {value = 1 : i64} : !ix.tensor<[64], f32>
  %a = ix.add %x, %zero : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[seq, 1], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %b = ix.add %zero, %a : (!ix.tensor<[seq, 1], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %c = ix.sub %b, %zero : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[seq, 1], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %d = ix.mul %c, %one : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %e = ix.mul %one, %d : (!ix.tensor<[64], f32>, !ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %f = ix.div %e, %one : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %g = ix.pow %f, %one : (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  func.return %g : !ix.tensor<[batch, seq, 64], f32>
}

// -----

// Integer neutral operands too.
// CHECK-LABEL: func.func @neutral_int
// CHECK-NEXT:    %zero = ix.constant {value = 0 : i64} : !ix.tensor<[], i32>
// CHECK-NEXT:    func.return %x : !ix.tensor<[batch], i32>
func.func @neutral_int(%x: !ix.tensor<[batch], i32>) -> !ix.tensor<[batch], i32> {
  %zero = ix.constant {value = 0 : i64} : !ix.tensor<[], i32>
  %a = ix.add %x, %zero : (!ix.tensor<[batch], i32>, !ix.tensor<[], i32>) -> !ix.tensor<[batch], i32>
  func.return %a : !ix.tensor<[batch], i32>
}

// -----

// Not neutral: the constant broadcasts x to a larger shape (x * 1 with broadcasting, 0 + x
// stretching a literal 1), a constant that is not the unit (x * 2, x + 1), the unit on the
// wrong side of a non-commutative op (1 - x, 1 / x, 1 ** x).
// CHECK-LABEL: func.func @not_neutral
// CHECK-NEXT:    %one = ix.constant {value = 1.000000e+00 : f32} : !ix.tensor<[batch, 64], f32>
// CHECK-NEXT:    %two = ix.constant {value = 2.000000e+00 : f32} : !ix.tensor<[64], f32>
// CHECK-NEXT:    %zero = ix.constant {value = 0.000000e+00 : f32} : !ix.tensor<[seq, 64], f32>
// CHECK-NEXT:    %a = ix.mul %x, %one : (!ix.tensor<[64], f32>, !ix.tensor<[batch, 64], f32>) -> !ix.tensor<[batch, 64], f32>
// CHECK-NEXT:    %b = ix.mul %x, %two : (!ix.tensor<[64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[64], f32>
// CHECK-NEXT:    %c = ix.add %zero, %y : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[1, 64], f32>) -> !ix.tensor<[seq, 64], f32>
// CHECK-NEXT:    %d = ix.add %x, %two : (!ix.tensor<[64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[64], f32>
// CHECK-NEXT:    %e = ix.sub %one, %x : (!ix.tensor<[batch, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[batch, 64], f32>
// CHECK-NEXT:    %f = ix.div %one, %x : (!ix.tensor<[batch, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[batch, 64], f32>
// CHECK-NEXT:    %g = ix.pow %one, %x : (!ix.tensor<[batch, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[batch, 64], f32>
// CHECK-NEXT:    %h = ix.mul %two, %x : (!ix.tensor<[64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[64], f32>
// CHECK-NEXT:    func.return
func.func @not_neutral(%x: !ix.tensor<[64], f32>, %y: !ix.tensor<[1, 64], f32>) -> (!ix.tensor<[batch, 64], f32>, !ix.tensor<[64], f32>, !ix.tensor<[seq, 64], f32>, !ix.tensor<[64], f32>, !ix.tensor<[batch, 64], f32>, !ix.tensor<[batch, 64], f32>, !ix.tensor<[batch, 64], f32>, !ix.tensor<[64], f32>) {
  %one = ix.constant {value = 1.0 : f32} : !ix.tensor<[batch, 64], f32>
  %two = ix.constant {value = 2.0 : f32} : !ix.tensor<[64], f32>
  %zero = ix.constant {value = 0.0 : f32} : !ix.tensor<[seq, 64], f32>
  %a = ix.mul %x, %one : (!ix.tensor<[64], f32>, !ix.tensor<[batch, 64], f32>) -> !ix.tensor<[batch, 64], f32>
  %b = ix.mul %x, %two : (!ix.tensor<[64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[64], f32>
  %c = ix.add %zero, %y : (!ix.tensor<[seq, 64], f32>, !ix.tensor<[1, 64], f32>) -> !ix.tensor<[seq, 64], f32>
  %d = ix.add %x, %two : (!ix.tensor<[64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[64], f32>
  %e = ix.sub %one, %x : (!ix.tensor<[batch, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[batch, 64], f32>
  %f = ix.div %one, %x : (!ix.tensor<[batch, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[batch, 64], f32>
  %g = ix.pow %one, %x : (!ix.tensor<[batch, 64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[batch, 64], f32>
  %h = ix.mul %two, %x : (!ix.tensor<[64], f32>, !ix.tensor<[64], f32>) -> !ix.tensor<[64], f32>
  func.return %a, %b, %c, %d, %e, %f, %g, %h : !ix.tensor<[batch, 64], f32>, !ix.tensor<[64], f32>, !ix.tensor<[seq, 64], f32>, !ix.tensor<[64], f32>, !ix.tensor<[batch, 64], f32>, !ix.tensor<[batch, 64], f32>, !ix.tensor<[batch, 64], f32>, !ix.tensor<[64], f32>
}

// -----

// neg(neg(x)) -> x; a third neg stays. The inner negs are left for dce.
// CHECK-LABEL: func.func @neg_neg
// CHECK-NEXT:    %a = ix.neg %x : (!ix.tensor<[seq], f32>) -> !ix.tensor<[seq], f32>
// CHECK-NEXT:    %c = ix.neg %x : (!ix.tensor<[seq], f32>) -> !ix.tensor<[seq], f32>
// CHECK-NEXT:    func.return %x, %c : !ix.tensor<[seq], f32>, !ix.tensor<[seq], f32>
func.func @neg_neg(%x: !ix.tensor<[seq], f32>) -> (!ix.tensor<[seq], f32>, !ix.tensor<[seq], f32>) {
  %a = ix.neg %x : (!ix.tensor<[seq], f32>) -> !ix.tensor<[seq], f32>
  %b = ix.neg %a : (!ix.tensor<[seq], f32>) -> !ix.tensor<[seq], f32>
  %c = ix.neg %b : (!ix.tensor<[seq], f32>) -> !ix.tensor<[seq], f32>
  func.return %b, %c : !ix.tensor<[seq], f32>, !ix.tensor<[seq], f32>
}

// -----

// A cast to x's own type goes; a cast that changes the dtype stays, and so do casts of
// constants (no folding across dtypes).
// CHECK-LABEL: func.func @cast
// CHECK-NEXT:    %b = ix.cast %x : (!ix.tensor<[batch, 4], bf16>) -> !ix.tensor<[batch, 4], f32>
// CHECK-NEXT:    %c = ix.cast %b : (!ix.tensor<[batch, 4], f32>) -> !ix.tensor<[batch, 4], bf16>
// CHECK-NEXT:    %k = ix.constant {value = 3.000000e+00 : f32} : !ix.tensor<[4], f32>
// CHECK-NEXT:    %l = ix.cast %k : (!ix.tensor<[4], f32>) -> !ix.tensor<[4], i32>
// CHECK-NEXT:    func.return %x, %c, %l
func.func @cast(%x: !ix.tensor<[batch, 4], bf16>) -> (!ix.tensor<[batch, 4], bf16>, !ix.tensor<[batch, 4], bf16>, !ix.tensor<[4], i32>) {
  %a = ix.cast %x : (!ix.tensor<[batch, 4], bf16>) -> !ix.tensor<[batch, 4], bf16>
  %b = ix.cast %x : (!ix.tensor<[batch, 4], bf16>) -> !ix.tensor<[batch, 4], f32>
  %c = ix.cast %b : (!ix.tensor<[batch, 4], f32>) -> !ix.tensor<[batch, 4], bf16>
  %k = ix.constant {value = 3.0 : f32} : !ix.tensor<[4], f32>
  %l = ix.cast %k : (!ix.tensor<[4], f32>) -> !ix.tensor<[4], i32>
  func.return %a, %c, %l : !ix.tensor<[batch, 4], bf16>, !ix.tensor<[batch, 4], bf16>, !ix.tensor<[4], i32>
}

// -----

// reshape to x's own type -> x; reshape(reshape(x)) -> one reshape, or x when it comes back.
// CHECK-LABEL: func.func @reshape
// CHECK-NEXT:    %b = ix.reshape %x : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch * seq, 64], f32>
// CHECK-NEXT:    %c = ix.reshape %x : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 4, 16], f32>
// CHECK-NEXT:    func.return %x, %c : !ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 4, 16], f32>
func.func @reshape(%x: !ix.tensor<[batch, seq, 64], f32>) -> (!ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 4, 16], f32>) {
  %a = ix.reshape %x : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  %b = ix.reshape %a : (!ix.tensor<[batch, seq, 64], f32>) -> !ix.tensor<[batch * seq, 64], f32>
  %c = ix.reshape %b : (!ix.tensor<[batch * seq, 64], f32>) -> !ix.tensor<[batch, seq, 4, 16], f32>
  %d = ix.reshape %c : (!ix.tensor<[batch, seq, 4, 16], f32>) -> !ix.tensor<[batch, seq, 64], f32>
  func.return %d, %c : !ix.tensor<[batch, seq, 64], f32>, !ix.tensor<[batch, seq, 4, 16], f32>
}

// -----

// A reshape that changes the shape stays.
// CHECK-LABEL: func.func @reshape_kept
// CHECK-NEXT:    %a = ix.reshape %x : (!ix.tensor<[seq, 8], f32>) -> !ix.tensor<[seq, 2, 4], f32>
// CHECK-NEXT:    func.return %a
func.func @reshape_kept(%x: !ix.tensor<[seq, 8], f32>) -> !ix.tensor<[seq, 2, 4], f32> {
  %a = ix.reshape %x : (!ix.tensor<[seq, 8], f32>) -> !ix.tensor<[seq, 2, 4], f32>
  func.return %a : !ix.tensor<[seq, 2, 4], f32>
}

// -----

// transpose with the identity perm -> x; transpose(transpose(x)) -> one transpose with the
// composed perm (%c), or x when the composition is the identity (%d undoes %c).
// CHECK-LABEL: func.func @transpose
// CHECK-NEXT:    %b = ix.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (!ix.tensor<[batch, seq, 4, 16], f32>) -> !ix.tensor<[batch, 4, seq, 16], f32>
// CHECK-NEXT:    %c = ix.transpose %x {perm = array<i64: 0, 2, 3, 1>} : (!ix.tensor<[batch, seq, 4, 16], f32>) -> !ix.tensor<[batch, 4, 16, seq], f32>
// CHECK-NEXT:    func.return %x, %c : !ix.tensor<[batch, seq, 4, 16], f32>, !ix.tensor<[batch, 4, 16, seq], f32>
func.func @transpose(%x: !ix.tensor<[batch, seq, 4, 16], f32>) -> (!ix.tensor<[batch, seq, 4, 16], f32>, !ix.tensor<[batch, 4, 16, seq], f32>) {
  %a = ix.transpose %x {perm = array<i64: 0, 1, 2, 3>} : (!ix.tensor<[batch, seq, 4, 16], f32>) -> !ix.tensor<[batch, seq, 4, 16], f32>
  %b = ix.transpose %a {perm = array<i64: 0, 2, 1, 3>} : (!ix.tensor<[batch, seq, 4, 16], f32>) -> !ix.tensor<[batch, 4, seq, 16], f32>
  %c = ix.transpose %b {perm = array<i64: 0, 1, 3, 2>} : (!ix.tensor<[batch, 4, seq, 16], f32>) -> !ix.tensor<[batch, 4, 16, seq], f32>
  %d = ix.transpose %c {perm = array<i64: 0, 3, 1, 2>} : (!ix.tensor<[batch, 4, 16, seq], f32>) -> !ix.tensor<[batch, seq, 4, 16], f32>
  func.return %d, %c : !ix.tensor<[batch, seq, 4, 16], f32>, !ix.tensor<[batch, 4, 16, seq], f32>
}

// -----

// A non-identity transpose stays, even when it keeps the type ([4, 4] swapped).
// CHECK-LABEL: func.func @transpose_kept
// CHECK-NEXT:    %a = ix.transpose %x {perm = array<i64: 1, 0>} : (!ix.tensor<[4, 4], f32>) -> !ix.tensor<[4, 4], f32>
// CHECK-NEXT:    func.return %a
func.func @transpose_kept(%x: !ix.tensor<[4, 4], f32>) -> !ix.tensor<[4, 4], f32> {
  %a = ix.transpose %x {perm = array<i64: 1, 0>} : (!ix.tensor<[4, 4], f32>) -> !ix.tensor<[4, 4], f32>
  func.return %a : !ix.tensor<[4, 4], f32>
}

// -----

// broadcast_to x's own type -> x; a real broadcast stays.
// CHECK-LABEL: func.func @broadcast_to
// CHECK-NEXT:    %b = ix.broadcast_to %x : (!ix.tensor<[1, 64], f32>) -> !ix.tensor<[seq, 64], f32>
// CHECK-NEXT:    func.return %x, %b
func.func @broadcast_to(%x: !ix.tensor<[1, 64], f32>) -> (!ix.tensor<[1, 64], f32>, !ix.tensor<[seq, 64], f32>) {
  %a = ix.broadcast_to %x : (!ix.tensor<[1, 64], f32>) -> !ix.tensor<[1, 64], f32>
  %b = ix.broadcast_to %x : (!ix.tensor<[1, 64], f32>) -> !ix.tensor<[seq, 64], f32>
  func.return %a, %b : !ix.tensor<[1, 64], f32>, !ix.tensor<[seq, 64], f32>
}

// -----

// A slice over the whole dim with step 1 -> x (symbolic end included); a partial slice, a
// strided slice and a slice of the last element stay.
// CHECK-LABEL: func.func @slice
// CHECK-NEXT:    %c = ix.slice %x {dim = 1 : i64, start = #ix.dim<1>, end = #ix.dim<seq + 1>} : (!ix.tensor<[batch, seq + 1], f32>) -> !ix.tensor<[batch, seq], f32>
// CHECK-NEXT:    %d = ix.slice %x {dim = 0 : i64, start = #ix.dim<0>, end = #ix.dim<batch>, step = 2 : i64} : (!ix.tensor<[batch, seq + 1], f32>) -> !ix.tensor<[(batch + 1) floordiv 2, seq + 1], f32>
// CHECK-NEXT:    %e = ix.slice %x {dim = -1 : i64, start = #ix.dim<seq>, end = #ix.dim<seq + 1>} : (!ix.tensor<[batch, seq + 1], f32>) -> !ix.tensor<[batch, 1], f32>
// CHECK-NEXT:    func.return %x, %x, %c, %d, %e
func.func @slice(%x: !ix.tensor<[batch, seq + 1], f32>) -> (!ix.tensor<[batch, seq + 1], f32>, !ix.tensor<[batch, seq + 1], f32>, !ix.tensor<[batch, seq], f32>, !ix.tensor<[(batch + 1) floordiv 2, seq + 1], f32>, !ix.tensor<[batch, 1], f32>) {
  %a = ix.slice %x {dim = 1 : i64, start = #ix.dim<0>, end = #ix.dim<seq + 1>} : (!ix.tensor<[batch, seq + 1], f32>) -> !ix.tensor<[batch, seq + 1], f32>
  %b = ix.slice %x {dim = -2 : i64, start = #ix.dim<0>, end = #ix.dim<batch>, step = 1 : i64} : (!ix.tensor<[batch, seq + 1], f32>) -> !ix.tensor<[batch, seq + 1], f32>
  %c = ix.slice %x {dim = 1 : i64, start = #ix.dim<1>, end = #ix.dim<seq + 1>} : (!ix.tensor<[batch, seq + 1], f32>) -> !ix.tensor<[batch, seq], f32>
  %d = ix.slice %x {dim = 0 : i64, start = #ix.dim<0>, end = #ix.dim<batch>, step = 2 : i64} : (!ix.tensor<[batch, seq + 1], f32>) -> !ix.tensor<[(batch + 1) floordiv 2, seq + 1], f32>
  %e = ix.slice %x {dim = -1 : i64, start = #ix.dim<seq>, end = #ix.dim<seq + 1>} : (!ix.tensor<[batch, seq + 1], f32>) -> !ix.tensor<[batch, 1], f32>
  func.return %a, %b, %c, %d, %e : !ix.tensor<[batch, seq + 1], f32>, !ix.tensor<[batch, seq + 1], f32>, !ix.tensor<[batch, seq], f32>, !ix.tensor<[(batch + 1) floordiv 2, seq + 1], f32>, !ix.tensor<[batch, 1], f32>
}

// -----

// concat of one input -> x; of two inputs it stays.
// CHECK-LABEL: func.func @concat
// CHECK-NEXT:    %b = ix.concat %x, %x {dim = 0 : i64} : (!ix.tensor<[seq, 8], f32>, !ix.tensor<[seq, 8], f32>) -> !ix.tensor<[2 * seq, 8], f32>
// CHECK-NEXT:    func.return %x, %b
func.func @concat(%x: !ix.tensor<[seq, 8], f32>) -> (!ix.tensor<[seq, 8], f32>, !ix.tensor<[2 * seq, 8], f32>) {
  %a = ix.concat %x {dim = 1 : i64} : (!ix.tensor<[seq, 8], f32>) -> !ix.tensor<[seq, 8], f32>
  %b = ix.concat %x, %x {dim = 0 : i64} : (!ix.tensor<[seq, 8], f32>, !ix.tensor<[seq, 8], f32>) -> !ix.tensor<[2 * seq, 8], f32>
  func.return %a, %b : !ix.tensor<[seq, 8], f32>, !ix.tensor<[2 * seq, 8], f32>
}

// -----

// max-iterations bounds the sweeps; one sweep, walking defs before uses, already folds a chain.
// RUN: inferx opt %s -p "canonicalize{max-iterations=1}" --split-input-file | filecheck %s --check-prefix=ONE
// ONE-LABEL: func.func @chain
// ONE:         func.return %x : !ix.tensor<[4], f32>
// RUN: not inferx opt %s -p "canonicalize{max-iterations=0}" 2>&1 | filecheck %s --check-prefix=ZERO
// ZERO: error: bad options for pass 'canonicalize': max-iterations must be >= 1, got 0
func.func @chain(%x: !ix.tensor<[4], f32>) -> !ix.tensor<[4], f32> {
  %a = ix.neg %x : (!ix.tensor<[4], f32>) -> !ix.tensor<[4], f32>
  %b = ix.neg %a : (!ix.tensor<[4], f32>) -> !ix.tensor<[4], f32>
  %c = ix.transpose %b {perm = array<i64: 0>} : (!ix.tensor<[4], f32>) -> !ix.tensor<[4], f32>
  func.return %c : !ix.tensor<[4], f32>
}
