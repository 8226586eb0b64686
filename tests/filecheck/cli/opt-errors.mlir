// Errors from `inferx opt` name what is wrong and exit non-zero.
// RUN: not inferx opt %s -p "no-such-pass" 2>&1 | filecheck %s --check-prefix=PASS
// PASS: error: unknown pass 'no-such-pass'; the passes are:
// PASS: canonicalize
// PASS: cse
// PASS: dce

// RUN: not inferx opt %s -p "cse{bogus=1}" 2>&1 | filecheck %s --check-prefix=OPTION
// OPTION: error: pass 'cse' has no option 'bogus'

// RUN: not inferx opt %s -p "dce{" 2>&1 | filecheck %s --check-prefix=MALFORMED
// MALFORMED: error: malformed pipeline 'dce{'

// RUN: not inferx opt %s.missing 2>&1 | filecheck %s --check-prefix=MISSING
// MISSING: error: cannot read {{.*}}opt-errors.mlir.missing

// RUN: inferx opt %s -p "cse,dce" --print-ir-after-all 2>&1 >/dev/null | filecheck %s --check-prefix=AFTER
// AFTER: // -----// IR after cse //----- //
// AFTER: // -----// IR after dce //----- //

func.func @f(%x: !ix.tensor<[4], f32>) -> !ix.tensor<[4], f32> {
  func.return %x : !ix.tensor<[4], f32>
}
