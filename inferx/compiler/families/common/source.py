"""The Triton module text every generated kernel shares: the imports, the interpreter switch, and
one ``@triton.jit`` function."""

from __future__ import annotations

HEADER = ("import os\n\nimport triton\nimport triton.language as tl\n"
          "from triton.language.extra import libdevice  # noqa: F401\n\n"
          'ON_GPU = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") != "1")\n\n')


def module_source(name: str, args: str, lines: list[str]) -> str:
    """A module holding the kernel ``name`` with parameters ``args`` and body ``lines``."""
    body = "\n".join(lines)
    return f"{HEADER}\n@triton.jit\ndef {name}({args}):\n{body}\n"
