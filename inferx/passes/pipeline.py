"""The pass manager: a pipeline string such as ``"canonicalize,cse,dce"`` or
``"canonicalize{max-iterations=4}"`` becomes a list of pass objects; running it verifies the IR
after every pass and can hand the IR to a callback after each one (``--print-ir-after-all``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, get_pass_option_infos
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError

from inferx.compiler.ir.dialect import make_context
from inferx.compiler.ir.textio import IRError, verify_module


class PipelineError(ValueError):
    """An unknown pass or option, or a malformed pipeline string; the message lists valid ones."""


def describe(passes: Mapping[str, type[ModulePass]]) -> str:
    lines = []
    for name, cls in sorted(passes.items()):
        opts = ", ".join(f"{o.name.replace('_', '-')}: {o.expected_type}" for o in get_pass_option_infos(cls))
        lines.append(f"  {name}" + (f"{{{opts}}}" if opts else ""))
    return "\n".join(lines)


def parse(spec: str, passes: Mapping[str, type[ModulePass]]) -> list[ModulePass]:
    """Turns a pipeline string into pass instances, or raises ``PipelineError``."""
    try:
        specs = list(parse_pipeline(spec))
    except (ArgSpecParseError, ValueError) as e:
        raise PipelineError(f"malformed pipeline {spec!r}: {e}") from None
    out: list[ModulePass] = []
    for s in specs:
        cls = passes.get(s.name)
        if cls is None:
            raise PipelineError(f"unknown pass '{s.name}'; the passes are:\n{describe(passes)}")
        valid = {f.name.replace("_", "-") for f in dataclasses.fields(cls)}
        unknown = [k for k in s.parameters if k.replace("_", "-") not in valid]
        if unknown:
            raise PipelineError(
                f"pass '{s.name}' has no option {', '.join(repr(k) for k in unknown)}; "
                f"its options: {', '.join(sorted(valid)) or 'none'}"
            )
        try:
            out.append(cls.from_spec(s))
        except Exception as e:
            raise PipelineError(f"bad options for pass '{s.name}': {e}") from None
    return out


AfterPass = Callable[[ModulePass, ModuleOp], None]


@dataclass(frozen=True)
class PassManager:
    """Runs passes in order on a module; the IR is verified after each, naming the pass at fault."""

    passes: Sequence[ModulePass]
    after_pass: AfterPass | None = None

    def run(self, module: ModuleOp) -> None:
        ctx = make_context()
        for p in self.passes:
            p.apply(ctx, module)
            try:
                verify_module(module)
            except IRError as e:
                raise IRError(f"IR does not verify after pass '{p.name}': {e}") from None
            if self.after_pass is not None:
                self.after_pass(p, module)
