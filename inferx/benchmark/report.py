"""What the benchmark prints and writes: one row per config, tables, and the JSON file.

A measurement is a dict ``{"entry", "batch", "seq", "context", "impl", "samples_ms", "median_ms",
"min_ms"}`` (or the same keys with ``"error"`` in place of the times). ``impl`` is "inferx",
"eager", "hf", or "compile:<mode>". ``config_rows`` folds a shape's measurements into one row per
config with the roofline beside them:

- ``fraction_of_roofline`` = roofline ms / InferX median ms (1.0 is the floor);
- ``speedup_vs_compile`` = the fastest torch.compile mode's median / InferX's (above 1: InferX is
  faster);
- ``tokens_per_s`` = batch * seq / InferX's median step.

With an int4 artifact ("inferx-int4", ``bench --quant``): ``int4_ms``, ``int4_speedup`` = InferX
bf16 ms / int4 ms, and ``int4_roofline_ms``, the floor with the weights' int4 bytes
(``roofline.int4_weight_bytes``), with ``int4_fraction`` = that floor / int4 ms. With an FP8 one
(``--quant fp8``, "inferx-fp8") the same columns named ``fp8_*`` (``roofline.fp8_weight_bytes``).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferx.benchmark.floor import LaunchFloor
from inferx.benchmark.roofline import (
    Ceilings,
    Dims,
    decode_bytes,
    decode_flops,
    fp8_weight_bytes,
    int4_weight_bytes,
    prefill_bytes,
    prefill_flops,
)

PEERS = ("eager", "hf", "compile")


def quant_kind(quant: str | None) -> str:
    """"fp8" for ``--quant fp8``, else "int4": the prefix of the quantized artifact's columns
    (``int4_ms``, ``fp8_ms``, ...), kernel tables and impl name (``inferx-int4``, ``inferx-fp8``)."""
    return "fp8" if quant == "fp8" else "int4"


@dataclass(frozen=True)
class QuantBytes:
    """What a quantized artifact's weights take: int4 (the scheme's group, whether it is
    symmetric) or fp8 (``kind``), whether its LM head is quantized too, and its KV cache's
    element bytes where they are not the model's."""

    group: int
    symmetric: bool
    head: bool
    kind: str = "int4"
    kv_elem: int | None = None  # bytes of a KV-cache element where not the model's (1: an FP8 cache)


def measurement(entry: str, batch: int, seq: int, context: int, impl: str, samples_ms: Sequence[float] | None = None,
                error: str | None = None, **extra: Any) -> dict[str, Any]:
    """A measurement record: the samples, their median and min, or the error that stopped it."""
    m: dict[str, Any] = {"entry": entry, "batch": batch, "seq": seq, "context": context, "impl": impl, **extra}
    if error is not None:
        m["error"] = error
    else:
        samples = [float(s) for s in samples_ms or ()]
        m.update(samples_ms=samples, median_ms=statistics.median(samples), min_ms=min(samples))
    return m


def _key(m: Mapping[str, Any]) -> tuple[str, int, int, int]:
    return (m["entry"], m["batch"], m["seq"], m["context"])


def config_rows(measurements: Iterable[Mapping[str, Any]], dims: Dims, ceilings: Ceilings,
                quant: QuantBytes | None = None) -> list[dict[str, Any]]:
    """One row per (entry, batch, seq, context), in the order configs first appear (see the module
    docstring for the derived columns; a column is None where its measurement is missing)."""
    groups: dict[tuple[str, int, int, int], dict[str, Mapping[str, Any]]] = {}
    for m in measurements:
        groups.setdefault(_key(m), {})[m["impl"]] = m
    rows = []
    for (entry, batch, seq, context), by_impl in groups.items():
        if entry == "decode":
            nbytes, flops = decode_bytes(dims, batch, context)["total"], decode_flops(dims, batch, context)
            roof = ceilings.decode_ms(dims, batch, context)
        else:
            last = entry == "prefill_last"
            nbytes, flops = prefill_bytes(dims, batch, seq, last=last)["total"], prefill_flops(dims, batch, seq, last)
            roof = ceilings.prefill_ms(dims, batch, seq, last)
        ms = {impl: m.get("median_ms") for impl, m in by_impl.items()}
        kind = quant.kind if quant is not None else "int4"
        q_ms = ms.get(f"inferx-{kind}")
        q_roof = None
        if quant is not None:
            w = (fp8_weight_bytes(dims, quant.head) if kind == "fp8"
                 else int4_weight_bytes(dims, quant.group, quant.symmetric, quant.head))
            q_roof = (ceilings.decode_ms(dims, batch, context, weights=w, kv_elem=quant.kv_elem) if entry == "decode"
                      else ceilings.prefill_ms(dims, batch, seq, entry == "prefill_last", weights=w))
        compiled = {impl: t for impl, t in ms.items() if impl.startswith("compile:") and t is not None}
        best = min(compiled, key=lambda k: compiled[k]) if compiled else None
        ix = ms.get("inferx")
        rows.append({
            "entry": entry, "batch": batch, "seq": seq, "context": context,
            "bytes": nbytes, "flops": flops, "roofline_ms": roof,
            "inferx_ms": ix, "tokens_per_s": batch * seq / (ix / 1e3) if ix else None,
            "fraction_of_roofline": roof / ix if ix else None,
            "eager_ms": ms.get("eager"), "hf_ms": ms.get("hf"),
            "compile_ms": compiled[best] if best else None, "compile_mode": best.split(":", 1)[1] if best else None,
            "speedup_vs_compile": compiled[best] / ix if best and ix else None,
            f"{kind}_ms": q_ms, f"{kind}_speedup": ix / q_ms if ix and q_ms else None, f"{kind}_roofline_ms": q_roof,
            f"{kind}_fraction": q_roof / q_ms if q_roof and q_ms else None,
            "errors": {impl: m["error"] for impl, m in by_impl.items() if "error" in m},
        })
    return rows


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def table(rows: Sequence[Sequence[str]], right_from: int = 1) -> list[str]:
    """Columns padded to their widest cell; columns from ``right_from`` on are right-aligned."""
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return ["  ".join(cell.rjust(w) if c >= right_from else cell.ljust(w)
                      for c, (cell, w) in enumerate(zip(r, widths, strict=True))).rstrip() for r in rows]


def config_label(row: Mapping[str, Any]) -> str:
    if row["entry"] == "decode":
        return f"decode b{row['batch']} ctx{row['context']}"
    last = ", last logits" if row["entry"] == "prefill_last" else ""
    return f"prefill b{row['batch']} {row['seq']} tok{last}"


def shape_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The per-shape table: InferX beside its roofline and its peers (times in ms per step)."""
    kind = next((k for k in ("int4", "fp8") for r in rows
                 if r.get(f"{k}_ms") is not None or r.get(f"{k}_roofline_ms") is not None), None)
    out = [["config", "InferX ms", "tokens/s", "% roofline", "vs compile", "compile ms", "mode", "eager ms", "hf ms",
            "roofline ms"] + ([f"{kind} ms", f"{kind} vs bf16", f"{kind} % roofline", f"{kind} roofline ms"]
                              if kind else [])]
    for r in rows:
        frac, speed = r["fraction_of_roofline"], r["speedup_vs_compile"]
        out.append([config_label(r), _ms(r["inferx_ms"]),
                    "-" if r["tokens_per_s"] is None else f"{r['tokens_per_s']:.0f}",
                    "-" if frac is None else f"{frac:.0%}", "-" if speed is None else f"{speed:.2f}x",
                    _ms(r["compile_ms"]), r["compile_mode"] or "-", _ms(r["eager_ms"]), _ms(r["hf_ms"]),
                    _ms(r["roofline_ms"])])
        if kind:
            q_speed, q_frac = r.get(f"{kind}_speedup"), r.get(f"{kind}_fraction")
            out[-1] += [_ms(r.get(f"{kind}_ms")), "-" if q_speed is None else f"{q_speed:.2f}x",
                        "-" if q_frac is None else f"{q_frac:.0%}", _ms(r.get(f"{kind}_roofline_ms"))]
    return table(out)


def kernel_table(kernels: Sequence[Mapping[str, Any]], floor: LaunchFloor | None = None) -> list[str]:
    """Per-kernel breakdown of one step: time over all launches, bytes and FLOPs per launch, achieved
    GB/s and TFLOP/s, share of the summed kernel time. Where kernels were tuned, the time their
    tuning record measured ("record us", - for the others). With ``floor`` (decode steps), each
    kernel's launch floor (a plain streaming kernel moving its bytes: fixed cost per launch plus
    bytes over the read rate) and, below, that of the whole chain."""
    total = sum(k["launches"] * k["ms_per_launch"] for k in kernels) or 1.0
    records = any(k.get("record_ms") is not None for k in kernels)
    out = [["kernel", "template", "launches", "us/launch"] + (["record us"] if records else [])
           + ["total ms", "MB/launch", "GB/s", "TFLOP/s", "share"] + (["launch floor us"] if floor else [])]
    for k in kernels:
        ms, nbytes, flops = k["ms_per_launch"], k.get("bytes_per_launch") or 0, k.get("flops_per_launch") or 0
        rec = k.get("record_ms")
        out.append([k["kernel"], k["template"], str(k["launches"]), f"{ms * 1e3:.1f}"]
                   + ([f"{rec * 1e3:.1f}" if rec is not None else "-"] if records else [])
                   + [f"{k['launches'] * ms:.3f}", f"{nbytes / 1e6:.2f}",
                      f"{nbytes / (ms / 1e3) / 1e9:.0f}" if ms > 0 else "-",
                      f"{flops / (ms / 1e3) / 1e12:.2f}" if ms > 0 else "-", f"{k['launches'] * ms / total:.1%}"]
                   + ([f"{floor.kernel_s(nbytes) * 1e6:.1f}"] if floor else []))
    launches = sum(k["launches"] for k in kernels)
    out.append(["total", "", str(launches), ""] + ([""] if records else []) + [f"{total:.3f}", "", "", "", ""]
               + ([""] if floor else []))
    lines = table(out, right_from=2)
    if floor:
        moved = sum(k["launches"] * (k.get("bytes_per_launch") or 0) for k in kernels)
        lines.append(f"launch floor of {launches} launches moving {moved / 1e6:.0f} MB: "
                     f"{floor.chain_s(launches, moved) * 1e3:.3f} ms ({floor.launch_s * 1e6:.2f} us per launch "
                     f"+ bytes / {floor.read_bytes_per_s / 1e12:.2f} TB/s, measured on plain streaming kernels)")
    return lines


# Compile options a run names in its header when on (the JSON's "options" holds them all)
COMPILE_FLAGS = ("overlap", "fuse_mlp", "fuse_attention_o")


def render(results: Mapping[str, Any]) -> str:
    """The text printed at the end of a run: a header, then each shape's tables and notes."""
    c = results["ceilings"]
    lf = results.get("launch_floor") or {}
    floor = LaunchFloor(**lf) if "launch_s" in lf else None
    lines = [f"device {results['device']}; copy {c['copy_bytes_per_s'] / 1e12:.2f} TB/s, "
             f"bf16 matmul {c['matmul_flops_per_s'] / 1e12:.0f} TFLOP/s; commit {results['commit']}",
             "times are medians in ms per step; roofline = floor ms / InferX ms; "
             "vs compile = fastest torch.compile ms / InferX ms"]
    if "error" in lf:
        lines.append(f"launch floor not measured: {lf['error']}")
    opts = results.get("options") or {}
    compiled = [flag for flag in COMPILE_FLAGS if opts.get(flag)]
    if compiled:
        lines.append(f"InferX compiled with {', '.join('--' + f.replace('_', '-') for f in compiled)}")
    kind = quant_kind(opts.get("quant"))
    if opts.get("quant"):
        head = f"{kind} too" if opts.get("quant_head") else "bf16"
        lines.append(f"InferX {kind}: every layer's linears {opts['quant']} (round-to-nearest), the LM head {head}")
    for s in results["shapes"]:
        lines += ["", f"== {s['name']} ({s['shape']}) =="]
        lines += shape_table(s["rows"])
        for prefix, name in (("", "InferX"), (f"{kind}_", f"InferX {kind}")):
            for key in ("kernels", "kernels_large"):
                if s.get(prefix + key):
                    kc = s[f"{prefix}{key}_config"]
                    lines += ["", f"{name} kernels, decode b{kc['batch']} ctx{kc['context']}:"]
                    lines += kernel_table(s[prefix + key], floor)
            if s.get(prefix + "prefill_kernels"):
                pc = s[prefix + "prefill_kernels_config"]
                lines += ["", f"{name} kernels, prefill b{pc['batch']} {pc['seq']} tok (each kernel's launches in a "
                          "graph of their own):"]
                lines += kernel_table(s[prefix + "prefill_kernels"])
            h = s.get(prefix + "host_ms")
            if h and "error" in h:
                lines.append(f"{name} host time per decode step: not measured: {h['error']}")
            elif h:
                lines.append(f"{name} host time per decode step: median {h['median']:.3f} ms over {h['steps']} steps")
            g = s.get(prefix + "generate")
            if g and "error" in g:
                lines.append(f"{name} generate: not measured: {g['error']}")
            elif g:
                lines.append(f"{name} generate at batch 1 ({g['prompt']}-token prompt, {g['tokens']} tokens): "
                             f"{g['ms_per_token']:.3f} ms a token")
        errors = [(r, impl, e) for r in s["rows"] for impl, e in r["errors"].items()]
        lines += [f"error: {config_label(r)} {impl}: {e}" for r, impl, e in errors]
        lines += [f"note: {n}" for n in s.get("notes", [])]
    return "\n".join(lines)


def write_json(results: Mapping[str, Any], path: Path) -> Path:
    """Writes ``results`` as JSON to ``path`` atomically (a temporary file in the same directory,
    then a rename), so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
