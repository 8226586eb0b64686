"""Reading and checking `ix` IR text, with errors that name the file, line, column and rule.

``parse_module`` remembers where each op started, so ``verify_module`` can report a verifier
failure as ``file:line:col: error: ix.add: <rule>`` rather than a dump of the module.

IR text may come from anywhere: brackets nested deeper than ``MAX_NESTING`` are refused before
parsing (the parser recurses on each level), and whatever else the parser or a verifier raises
on malformed input (a number too long to convert, a dim too large) is reported as an ``IRError``
at the op, never as a traceback. Both steps take time linear in the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException

from inferx.compiler.ir.dialect import make_context


class IRError(Exception):
    """A user-facing IR error; ``str()`` is the whole message, location first."""


@dataclass
class SourceMap:
    """Where each parsed op began in its file."""

    name: str
    text: str
    starts: dict[int, int] = field(default_factory=dict)  # id(op) -> character offset

    def line_col(self, offset: int) -> tuple[int, int]:
        line = self.text.count("\n", 0, offset) + 1
        col = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
        return line, col

    def where(self, op: Operation) -> str:
        offset = self.starts.get(id(op))
        if offset is None:
            return self.name
        line, col = self.line_col(offset)
        return f"{self.name}:{line}:{col}"


class _RecordingParser(Parser):
    def __init__(self, text: str, name: str, source: SourceMap):
        super().__init__(make_context(), text, name)
        self._source = source
        self.open_ops: list[int] = []  # where each op being parsed began, outermost first

    def parse_optional_operation(self) -> Operation | None:
        start = self.pos
        self.open_ops.append(start)
        op = super().parse_optional_operation()
        self.open_ops.pop()
        if op is not None:
            self._source.starts[id(op)] = start
        return op


# Brackets ((, [, {, <) open at once: real IR stays under 20; the parser's recursion allows ~100.
MAX_NESTING = 64
# A string literal as the lexer reads it (escapes \n \t \\ \" or two hex digits), one character
# at a time: the lexer's own pattern backtracks exponentially on a literal that is not closed.
_STRING = r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"'
# An integer type (i32, si8, ui1, ...): the parser builds its value range, 2**width, eagerly.
_INT_TYPE = r"(?<![\w%@#.$-])[su]?i(\d+)\b"
MAX_INT_BITS = 128
_BRACKETS = re.compile(_STRING + r'|//[^\n]*|"|->|' + _INT_TYPE + r"|[(\[{<)\]}>]")


def _check_nesting(text: str, name: str) -> None:
    """Brackets nest at most ``MAX_NESTING`` deep, every string literal is closed and no integer
    type is wider than ``MAX_INT_BITS``."""
    depth = 0
    for m in _BRACKETS.finditer(text):
        tok = m.group()
        if tok == '"':
            line, col = SourceMap(name, text).line_col(m.start())
            raise IRError(f"{name}:{line}:{col}: error: a string literal not closed on its line (or with an "
                          f"escape other than \\n \\t \\\\ \\\" or two hex digits)\n{_caret(text, m.start())}")
        if m.group(1) is not None:
            if len(m.group(1)) > 4 or int(m.group(1)) > MAX_INT_BITS:
                line, col = SourceMap(name, text).line_col(m.start())
                raise IRError(f"{name}:{line}:{col}: error: integer type {tok[:40]} is wider than {MAX_INT_BITS} bits\n"
                              f"{_caret(text, m.start())}")
            continue
        if tok in "([{<":
            depth += 1
            if depth > MAX_NESTING:
                line, col = SourceMap(name, text).line_col(m.start())
                raise IRError(f"{name}:{line}:{col}: error: brackets nested more than {MAX_NESTING} deep\n"
                              f"{_caret(text, m.start())}")
        elif tok in ")]}>":
            depth -= 1


def parse_module(text: str, name: str = "<input>") -> tuple[ModuleOp, SourceMap]:
    """Parses IR text; a syntax error raises ``IRError`` with line, column and a caret."""
    _check_nesting(text, name)
    source = SourceMap(name, text)
    parser = _RecordingParser(text, name, source)
    try:
        module = parser.parse_module()
    except (ValueError, ArithmeticError, RecursionError) as e:  # malformed beyond the grammar's checks
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e).split("\n")[0]
        if "integer string conversion" in why:
            why = "an integer literal too long to read"
        at = min(parser.pos, len(text))
        line, col = source.line_col(at)
        raise IRError(f"{name}:{line}:{col}: error: {why}\n{_caret(text, at)}") from None
    except ParseError as e:
        line, col = source.line_col(e.span.start)
        raise IRError(f"{name}:{line}:{col}: error: {e.msg}\n{_caret(text, e.span.start)}") from None
    except VerifyException as e:
        # The assembly format checks operand and result types while parsing; such an error has
        # no span of its own, so it is reported at the op being parsed.
        start = parser.open_ops[-1] if parser.open_ops else 0
        line, col = source.line_col(start)
        op_name = _OP_NAME.match(text, start)
        prefix = f"{op_name.group(1)}: " if op_name else ""
        msg = str(e).split("\n")[0]
        wrong = re.fullmatch(r"(.*) should be of base attribute ix\.tensor", msg)
        if wrong:
            msg = f"operands and results must be !ix.tensor values, got {wrong.group(1)}"
        raise IRError(f"{name}:{line}:{col}: error: {prefix}{msg}\n{_caret(text, start)}") from None
    return module, source


_OP_NAME = re.compile(r"(?:%[^=]*=\s*)?\"?([A-Za-z_][\w.]*)")


def verify_module(module: ModuleOp, source: SourceMap | None = None) -> None:
    """Verifies every op, in order, and that each value is defined before its first use (the
    parser lets ``%a = ix.add %a, ...`` through); the first failure raises ``IRError`` naming it."""
    defined: set[SSAValue] = {a for op in module.walk() for r in op.regions for b in r.blocks for a in b.args}
    for op in module.walk(reverse=False):
        try:
            for i, v in enumerate(op.operands):
                if v not in defined:
                    raise VerifyException(f"{op.name}: operand #{i} is used before it is defined")
            defined.update(op.results)
            op.verify(verify_nested_ops=False)
        except (VerifyException, ValueError, ArithmeticError) as e:
            where = source.where(op) if source else "<ir>"
            if not isinstance(e, VerifyException):
                e = VerifyException(f"{op.name}: {e}")
            msg = str(e).split("\n")[0] if "Operation does not verify" not in str(e) else _first_rule(e)
            text = f"{where}: error: {msg}"
            if source and id(op) in source.starts:
                text += "\n" + _caret(source.text, source.starts[id(op)])
            raise IRError(text) from None


def _first_rule(e: VerifyException) -> str:
    for line in str(e).splitlines():
        if "Operation does not verify:" in line:
            return line.split("Operation does not verify:", 1)[1].strip(" |-")
    return str(e).splitlines()[0]


def _caret(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    line = text[start : end if end != -1 else len(text)]
    return f"{line}\n{' ' * (offset - start)}^"
