"""A kernel build worker: ``python -m inferx.compiler.build_worker``, started by ``build_cubins``
(``inferx.compiler.build``), builds one kernel per request until its stdin closes.

Each request is a line of JSON on stdin, ``{"kernel": <KernelSource JSON>, "arch": 90}``; each
answer a line on stdout, ``{"built": {...}}`` (what ``compile_one`` returns, the cubin in base64)
or ``{"error": "..."}``. Whatever else the build prints goes to stderr, so stdout carries answers
only. Started by module name, the worker imports InferX and Triton and never the caller's
``__main__``: compiling from a notebook, a REPL, ``python -`` or a script without a main guard
is the same. It runs Triton compiled, whatever mode the caller's Triton is in.
"""

from __future__ import annotations

import base64
import json
import os
import sys


def main() -> None:
    os.environ["TRITON_INTERPRET"] = "0"
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # prints from inside the build land on stderr, never among the answers
    from inferx.compiler.build import compile_one

    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
            built = compile_one(json.dumps(request["kernel"]), int(request["arch"]))
            built["cubin"] = base64.b64encode(built["cubin"]).decode("ascii")
            answer: dict[str, object] = {"built": built}
        except Exception as e:  # the parent names the kernel
            answer = {"error": str(e) or type(e).__name__}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
