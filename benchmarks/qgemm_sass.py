"""Instructions a code in the qgemm kernel's K loop, counted on the sm_90 cubin (no GPU needed:
Triton's ptxas builds it, its cuobjdump disassembles it). The hot loop is the longest backward
branch's body; codes a thread-lane handles per trip are BN x BK / (32 x warps).

    python benchmarks/qgemm_sass.py --shape gate/up --schedule 1,16,512,4,2 --schedule 16,32,128,4,4

Issue-bound, 132 SMs at 128 lanes a clock keep pace with 4.28 TB/s (33 codes a SM-clock) at about
3.9 instructions a code; see docs/performance.md ("int4 weights (W4A16): speed")."""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from qgemm_probe import SHAPES_8B, kernel_op  # noqa: E402

from inferx.compiler.build import compile_one  # noqa: E402
from inferx.compiler.families.qgemm import codegen  # noqa: E402
from inferx.compiler.families.qgemm.schedule import QGemmSchedule  # noqa: E402


def loop_counts(sass: str) -> collections.Counter[str]:
    """Opcode counts of the longest loop (a backward branch's body) in ``sass``."""
    ins = []
    for line in sass.splitlines():
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)(.*?);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2), m.group(3)))
    best: list[tuple[int, str, str]] = []
    for addr, op, args in ins:
        target = re.search(r"0x([0-9a-f]+)", args) if op.startswith("BRA") else None
        if target and int(target.group(1), 16) < addr:
            body = [i for i in ins if int(target.group(1), 16) <= i[0] <= addr]
            best = body if len(body) > len(best) else best
    return collections.Counter(op.split(".")[0] for _, op, _ in best)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", choices=sorted(SHAPES_8B), default="gate/up")
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--group", type=int, default=128)
    p.add_argument("--schedule", action="append", default=[], metavar="BM,BN,BK,WARPS,STAGES")
    a = p.parse_args()
    os.environ["TRITON_INTERPRET"] = "0"
    tools = Path(__import__("triton").__file__).parent / "backends" / "nvidia" / "bin"
    n, k = SHAPES_8B[a.shape]
    for text in a.schedule or ["1,16,512,4,2"]:
        s = QGemmSchedule(*(int(v) for v in text.split(",")))
        ks = codegen.generate(kernel_op(a.rows, k, n, a.group), "k", s)
        built = compile_one(json.dumps(ks.to_json()), 90)
        cubin = Path("/tmp") / f"qgemm_sass_{os.getpid()}.cubin"
        cubin.write_bytes(built["cubin"])
        sass = subprocess.run([str(tools / "cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True,
                              check=True).stdout
        cubin.unlink()
        counts = loop_counts(sass)
        per = sum(counts.values()) / (s.bn * s.bk / (32 * s.num_warps))
        top = ", ".join(f"{op} {c}" for op, c in counts.most_common(8))
        print(f"{a.shape} m={a.rows} {text}: {sum(counts.values())} instructions a trip, {per:.2f} a code ({top})")


if __name__ == "__main__":
    main()
