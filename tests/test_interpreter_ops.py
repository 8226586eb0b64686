"""The reference interpreter against PyTorch, op by op, plus its error messages.

Every ix op has >= 10 samples in ``opinfo.py`` (odd sizes 1, 7, 129; symbolic ``batch``/``seq``/
``ctx`` bound to different sizes). Each runs through ``Interpreter`` and is compared with an fp32
PyTorch reference rounded to the result dtype. Tolerances: f32 atol=rtol=1e-5; f16 2e-3 and bf16
1.6e-2 (about 2 ulp: the interpreter rounds once from float64); casts, shape ops and ints exact.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from opinfo import EXACT, TOL, TORCH_DTYPE, Builder, Sample, T, all_samples, rand, s, tt
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region

from inferx.compiler.interpreter import Interpreter, InterpreterError
from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as ts
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.dialect import IX_OPS
from inferx.compiler.ir.ops_base import int_attr
from inferx.compiler.ir.types import DType, TensorType

SAMPLES = all_samples()
ALL = [smp for samples in SAMPLES.values() for smp in samples]


def test_every_op_has_ten_samples() -> None:
    missing = [op.name for op in IX_OPS if len(SAMPLES.get(op, [])) < 10]
    assert not missing, f"ops with fewer than 10 samples: {missing}"


def _expected(ref: torch.Tensor, t: TensorType) -> np.ndarray:
    if t.dtype is DType.i4:
        return ref.numpy()
    out = ref.to(TORCH_DTYPE[t.dtype.value])
    return out.float().numpy() if out.is_floating_point() else out.numpy()


@pytest.mark.parametrize("smp", ALL, ids=[smp.id for smp in ALL])
def test_op_matches_torch(smp: Sample) -> None:
    repro = (f"repro: pytest tests/test_interpreter_ops.py -k '{smp.id}'  (seed {smp.seed}; "
             f"{smp.shapes()})")
    module = smp.module()
    got = Interpreter(module, smp.weights).run("f", *[x for _, x in smp.args])
    refs = smp.reference(*[tt(x) for _, x in smp.args], *[tt(w) for w in smp.weights.values()])
    func = next(iter(module.ops))
    assert isinstance(func, FuncOp)
    assert len(got) == len(refs), repro
    for k, (g, r, t) in enumerate(zip(got, refs, func.function_type.outputs, strict=True)):
        assert isinstance(t, TensorType)
        want = _expected(r, t)
        tol = smp.tol or TOL.get(t.dtype, EXACT)
        assert g.shape == want.shape, f"result #{k}: shape {g.shape} vs {want.shape}\n{repro}"
        if tol is EXACT or not t.dtype.is_float:
            np.testing.assert_array_equal(g.astype(np.float64), want.astype(np.float64),
                                          err_msg=f"result #{k}\n{repro}")
        else:
            np.testing.assert_allclose(g.astype(np.float64), want.astype(np.float64), atol=tol.atol,
                                       rtol=tol.rtol, equal_nan=True, err_msg=f"result #{k}\n{repro}")


# errors ---------------------------------------------------------------------------------------


def _module(arg_types, build) -> ModuleOp:
    block = Block(arg_types=arg_types)
    b = Builder()
    results = build(b, list(block.args))
    block.add_ops([*b.ops, ReturnOp(*results)])
    ftype = FunctionType.from_lists(arg_types, [r.type for r in results])
    return ModuleOp([FuncOp("f", ftype, Region(block))])


def _add_module() -> ModuleOp:
    t = T(("batch", "seq", 4))
    return _module([t, t], lambda b, a: [b(ts.AddOp, a[0], a[1])])


def _x(*shape: int, dtype: str = "f32") -> np.ndarray:
    return rand(np.random.default_rng(0), shape, dtype)


def _raises(match: str, fn, *args) -> str:
    with pytest.raises(InterpreterError, match=match) as info:
        fn(*args)
    return str(info.value)


def test_symbol_bound_twice_names_both_args() -> None:
    it = Interpreter(_add_module(), {})
    msg = _raises("symbol 'seq' is 5", it.run, "f", _x(2, 3, 4), _x(2, 5, 4))
    assert "argument #1" in msg and "argument #0 dim 1 bound it to 3" in msg


def test_rank_mismatch() -> None:
    msg = _raises("expected rank 3", Interpreter(_add_module(), {}).run, "f", _x(2, 3), _x(2, 3, 4))
    assert "@f argument #0" in msg and "[2, 3]" in msg


def test_static_dim_mismatch() -> None:
    _raises(r"dim 2 must be 4 .* got shape \[2, 3, 5\]", Interpreter(_add_module(), {}).run, "f",
            _x(2, 3, 5), _x(2, 3, 5))


def test_wrong_dtype() -> None:
    msg = _raises("expected f32", Interpreter(_add_module(), {}).run, "f", _x(2, 3, 4, dtype="f16"),
                  _x(2, 3, 4))
    assert "float16" in msg


def test_wrong_argument_count() -> None:
    _raises("takes 2 arguments, got 1", Interpreter(_add_module(), {}).run, "f", _x(2, 3, 4))


def test_unknown_func() -> None:
    _raises(r"no func @prefill .*funcs: @f", Interpreter(_add_module(), {}).run, "prefill")


def _weight_module() -> ModuleOp:
    t = T(("batch", 8))
    return _module([t], lambda b, a: [b(nn.LinearOp, a[0], b(ts.WeightOp, result_types=[T((3, 8))],
                                                              name=s("lm_head.weight")), None)])


def test_missing_weight() -> None:
    msg = _raises("weight 'lm_head.weight'", Interpreter(_weight_module(), {}).run, "f", _x(2, 8))
    assert "not in the weight store" in msg


def test_weight_of_wrong_shape_and_dtype() -> None:
    it = Interpreter(_weight_module(), {"lm_head.weight": _x(8, 3)})
    _raises(r"weight 'lm_head.weight' has shape \[8, 3\]", it.run, "f", _x(2, 8))
    it = Interpreter(_weight_module(), {"lm_head.weight": _x(3, 8).astype(np.float64)})
    _raises("weight 'lm_head.weight' has dtype float64", it.run, "f", _x(2, 8))


def test_unknown_op_is_named() -> None:
    it = Interpreter(_add_module(), {}, kernels={})
    _raises("no kernel for op 'ix.add'", it.run, "f", _x(1, 2, 4), _x(1, 2, 4))


def test_result_shape_mismatch_names_the_op() -> None:
    def bad_add(op, ins, ctx):
        return [ins[0][:, :1]]

    it = Interpreter(_add_module(), {}, kernels={ts.AddOp: bad_add})
    msg = _raises(r"ix.add result #0 has shape \[2, 1, 4\]", it.run, "f", _x(2, 3, 4), _x(2, 3, 4))
    assert "batch=2, seq=3" in msg


def test_symbol_expression_dims_bind_and_check() -> None:
    seq = sy.sym("seq")
    t_in, t_cat = T(("seq", 4)), T((sy.add(seq, 1), 4))
    module = _module([t_in, t_cat], lambda b, a: [b(ts.ConcatOp, [a[0], a[1]], dim=int_attr(0))])
    it = Interpreter(module, {})
    (out,) = it.run("f", _x(3, 4), _x(4, 4))
    assert out.shape == (7, 4)
    _raises(r"dim 0 is seq \+ 1 = 4 with seq=3, got size 5", it.run, "f", _x(3, 4), _x(5, 4))


def test_out_of_range_embedding_id() -> None:
    module = _module([T((5, 4)), T(("seq",), "i32")], lambda b, a: [b(nn.EmbeddingOp, a[0], a[1])])
    _raises("id 9 is out of range for a table of 5 rows", Interpreter(module, {}).run, "f", _x(5, 4),
            np.array([1, 9], dtype=np.int32))


def test_symbol_no_argument_binds() -> None:
    module = _module([T((2, 3))], lambda b, a: [b(ts.BroadcastToOp, a[0], result_types=[T(("batch", 2, 3))])])
    _raises("ix.broadcast_to.*symbol 'batch' .* is not bound", Interpreter(module, {}).run, "f",
            _x(2, 3))
