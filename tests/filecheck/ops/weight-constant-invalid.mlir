// Broken rules of ix.weight and ix.constant.
// RUN: not inferx opt %s --split-input-file 2>&1 | filecheck %s

func.func @weight_no_name() {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.weight: needs a non-empty string attribute 'name' naming the weight
  %0 = ix.weight : !ix.tensor<[4], f32>
  func.return
}

// -----

func.func @weight_empty_name() {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.weight: needs a non-empty string attribute 'name' naming the weight
  %0 = ix.weight {name = ""} : !ix.tensor<[4], f32>
  func.return
}

// -----

func.func @weight_name_not_string() {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.weight: needs a non-empty string attribute 'name' naming the weight
  %0 = ix.weight {name = 3 : i64} : !ix.tensor<[4], f32>
  func.return
}

// -----

func.func @weight_symbolic_shape() {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.weight: weight 'w' must have a static shape, got [vocab, 64] f32
  %0 = ix.weight {name = "w"} : !ix.tensor<[vocab, 64], f32>
  func.return
}

// -----

func.func @constant_no_value() {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.constant: missing attribute 'value' (the scalar to splat)
  %0 = ix.constant : !ix.tensor<[4], f32>
  func.return
}

// -----

func.func @constant_string_value() {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.constant: attribute 'value' must be a number, got "one"
  %0 = ix.constant {value = "one"} : !ix.tensor<[4], f32>
  func.return
}

// -----

func.func @constant_float_value_for_int() {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.constant: attribute 'value' of a i32 tensor must be an integer, got 1.500000e+00 : f64
  %0 = ix.constant {value = 1.5 : f64} : !ix.tensor<[4], i32>
  func.return
}

// -----

func.func @constant_bool_out_of_range() {
  // CHECK: :[[# @LINE + 1]]:3: error: ix.constant: attribute 'value' of a bool tensor must be 0 or 1, got 2 : i64
  %0 = ix.constant {value = 2 : i64} : !ix.tensor<[4], bool>
  func.return
}
