"""Comments, docstrings and help texts in inferx/ say what code does and why, not when it was
measured: none cites a date, a commit or a work session (figures live in docs/performance.md)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "inferx"
HISTORY = [
    (re.compile(r"\b20\d\d-\d\d-\d\d\b"), "a date"),
    (re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b"), "a commit hash"),
    (re.compile(r"\b(\w+(th|st|nd|rd)|first|second|third|last|this|previous) session\b", re.I), "a session"),
    (re.compile(r"NOTES\.md"), "the removed lab notebook"),
]


def prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment, docstring and click help text in ``path``."""
    src = path.read_text()
    out = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(src).readline)
           if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((node.body[0].lineno, doc))
        if isinstance(node, ast.keyword) and node.arg == "help" and isinstance(node.value, ast.Constant):
            out.append((node.value.lineno, str(node.value.value)))
    return out


def test_no_comment_docstring_or_help_cites_history() -> None:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        for line, text in prose(path):
            for pattern, what in HISTORY:
                m = pattern.search(text)
                if m:
                    bad.append(f"{path.relative_to(ROOT.parent)}:{line}: {what} ({m.group(0)!r})")
    assert not bad, "history in the code's prose:\n" + "\n".join(bad)
