"""The torch.export frontend against PyTorch: a dynamic-batch MLP, a tiny BERT, and the error for an
unsupported op. Numbers are compared in fp32 through the reference interpreter; a failure prints a
one-line repro.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.export import Dim

from inferx.compiler.frontend.torch_export import UnsupportedOpError, import_torch_module
from inferx.compiler.interpreter import Interpreter


class MLP(torch.nn.Module):
    def __init__(self, hidden: int = 16, inner: int = 37):
        super().__init__()
        self.fc1 = torch.nn.Linear(hidden, inner)
        self.fc2 = torch.nn.Linear(inner, hidden)
        self.norm = torch.nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.fc2(torch.nn.functional.gelu(self.fc1(x))) + x)


def _close(got: np.ndarray, want: torch.Tensor, tol: float, repro: str) -> None:
    want_np = want.detach().numpy()
    assert got.shape == want_np.shape, f"shape {got.shape} vs {want_np.shape}; repro: {repro}"
    err = float(np.max(np.abs(got - want_np)))
    assert err <= tol, f"max abs error {err:.3g} > {tol}; repro: {repro}"


def test_mlp_dynamic_batch() -> None:
    torch.manual_seed(0)
    model = MLP().eval()
    program = import_torch_module(model, (torch.randn(4, 16),), dynamic_shapes=({0: Dim("batch")},))
    text = program.text()
    assert "func.func @forward(%x: !ix.tensor<[batch, 16], f32>)" in text
    assert "-> !ix.tensor<[batch, 37], f32>" in text
    assert set(program.weights) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "norm.weight",
                                    "norm.bias"}
    interp = Interpreter(program.module, program.weights)
    for batch in (1, 3, 7):
        x = torch.randn(batch, 16, generator=torch.Generator().manual_seed(batch))
        (out,) = interp.run("forward", x.numpy())
        repro = (f"pytest tests/test_torch_export.py::test_mlp_dynamic_batch  # batch={batch}, "
                 f"seeds torch.manual_seed(0) / Generator().manual_seed({batch})")
        _close(out, model(x), 1e-5, repro)


def test_derived_dim_becomes_an_expression() -> None:
    class Cat(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch.cat([x, y], 0)[1:].transpose(0, 1)

    batch = Dim("batch")
    program = import_torch_module(Cat(), (torch.randn(3, 4), torch.randn(6, 4)),
                                  dynamic_shapes=({0: batch}, {0: 2 * batch}))
    assert "!ix.tensor<[2 * batch, 4], f32>" in program.text()
    assert "-> !ix.tensor<[4, 3 * batch - 1], f32>" in program.text()
    x, y = torch.randn(5, 4), torch.randn(10, 4)
    (out,) = Interpreter(program.module, program.weights).run("forward", x.numpy(), y.numpy())
    _close(out, Cat()(x, y), 0.0, "pytest tests/test_torch_export.py::test_derived_dim_becomes_an_expression")


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_tiny_bert(attn: str) -> None:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=97, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=37,
                                     max_position_embeddings=64)
    config._attn_implementation = attn
    model = transformers.BertModel(config).eval()
    ids = torch.randint(0, 97, (2, 11), generator=torch.Generator().manual_seed(1))
    program = import_torch_module(model, (ids,))
    text = program.text()
    assert "embeddings.position_ids" in program.weights  # sliced in the IR, not folded into a copy
    if attn == "sdpa":
        assert text.count("ix.attention") == 2
    out = Interpreter(program.module, program.weights).run("forward", ids.numpy())
    with torch.no_grad():
        ref = model(ids)
    repro = f"pytest 'tests/test_torch_export.py::test_tiny_bert[{attn}]'  # seeds 0 (model), 1 (ids)"
    _close(out[0], ref.last_hidden_state, 1e-4, repro)
    _close(out[1], ref.pooler_output, 1e-4, repro)


def test_unsupported_op_names_op_and_module_path() -> None:
    class Prefix(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cumsum(x, dim=-1)

    class Outer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)
            self.blocks = torch.nn.ModuleList([torch.nn.Identity(), Prefix()])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.blocks[1](self.proj(x))

    with pytest.raises(UnsupportedOpError) as info:
        import_torch_module(Outer(), (torch.randn(2, 8),))
    message = str(info.value)
    assert "aten.cumsum.default" in message
    assert "in module 'blocks.1' (Prefix)" in message
    assert "torch.cumsum(x, dim=-1)" in message
    assert "test_torch_export.py:" in message
