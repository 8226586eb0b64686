// Malformed !ix.tensor types and #ix.dim attributes: each is a parse error at the bad token.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

// CHECK: :[[# @LINE + 1]]:46: error: unknown element type 'f33'; expected one of f32, f16, bf16, f8e4m3, i8, i4, i32, i64, bool
func.func @unknown_dtype(%a: !ix.tensor<[4], f33>) {
  func.return
}

// -----

// CHECK: :[[# @LINE + 1]]:44: error: Expected ',' between the shape and the element type
func.func @missing_dtype(%a: !ix.tensor<[4]>) {
  func.return
}

// -----

// CHECK: :[[# @LINE + 1]]:47: error: expected a dim: an integer, a symbol name or '('
func.func @dangling_plus(%a: !ix.tensor<[seq +], f32>) {
  func.return
}

// -----

// CHECK: :[[# @LINE + 1]]:55: error: floordiv takes a positive integer constant
func.func @floordiv_zero(%a: !ix.tensor<[seq floordiv 0], f32>) {
  func.return
}

// -----

// CHECK: :[[# @LINE + 1]]:57: error: floordiv takes a positive integer constant
func.func @floordiv_symbol(%a: !ix.tensor<[seq floordiv batch], f32>) {
  func.return
}

// -----

// CHECK: :[[# @LINE + 1]]:47: error: 'floordiv' is an operator, not a symbol name
func.func @floordiv_as_symbol(%a: !ix.tensor<[floordiv], f32>) {
  func.return
}

// -----

// CHECK: :[[# @LINE + 1]]:51: error: Expected ')' to close a dim expression
func.func @unclosed_paren(%a: !ix.tensor<[(seq + 1], f32>) {
  func.return
}

// -----

// CHECK: :[[# @LINE + 1]]:41: error: expected ',' or ']' after a dim (dim operators are +, -, * and floordiv)
func.func @bad_char(%a: !ix.tensor<[seq / 2], f32>) {
  func.return
}

// -----

// CHECK: :[[# @LINE + 1]]:51: error: expected ',' or ']' after a dim (dim operators are +, -, * and floordiv)
func.func @unclosed_shape(%a: !ix.tensor<[seq, f32>) {
  func.return
}

// -----

func.func @empty_dim_attr(%x: !ix.tensor<[8], f32>) {
  // CHECK: :[[# @LINE + 1]]:52: error: expected a dim: an integer, a symbol name or '('
  %0 = ix.slice %x {dim = 0 : i64, start = #ix.dim<>, end = #ix.dim<4>} : (!ix.tensor<[8], f32>) -> !ix.tensor<[4], f32>
  func.return
}
