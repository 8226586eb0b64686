"""What `inferx inspect` reports about an artifact: the summary (files, versions, model, limits,
kernels per entry and per layer, schedules and where they came from, the memory plan, fallbacks,
float and int4 weights) as a dict, and its rendering as text."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inferx.runtime.artifact import Artifact
    from inferx.runtime.manifest import EntryPlan, Manifest


def inspect_summary(art: Artifact, m: Manifest) -> dict[str, Any]:
    """What ``inspect`` shows: the artifact's files and versions, and what its manifest says."""
    kernels = {name: meta.kernel for name, meta in m.kernels.items()}
    num_layers = m.model.num_layers
    entries = {}
    uses: dict[str, Counter[str]] = {name: Counter() for name in kernels}
    for ename, entry in m.entries.items():
        names = [step.kernel for step in entry.launches]
        for step in entry.launches:  # a launch with per-bucket variants counts in each
            for bound, n in step.by_rows or ((None, step.kernel),):
                uses[n][ename if bound is None else f"{ename}@rows<={bound}"] += 1
        templates = [kernels[n].template for n in names]
        span = _layer_span(entry, num_layers)
        if span is None:
            layers: dict[str, Any] | None = None
        else:
            start, end = span
            inside = templates[start:end]
            outside = templates[:start] + templates[end:]
            layers = {
                "num_layers": num_layers,
                "per_layer": len(inside) // num_layers,
                "per_layer_by_template": _count(inside[: len(inside) // num_layers]),
                "non_layer": len(outside),
                "non_layer_by_template": _count(outside),
            }
        plan = m.memory_plan.get(ename)
        entries[ename] = {
            "launches": len(names),
            "distinct_kernels": len(set(names)),
            "by_template": _count(templates),
            "layers": layers,
            "memory_plan": [b.to_json() for b in plan.buckets] if plan is not None else [],
        }
    kernel_rows = {}
    for name, k in sorted(kernels.items()):
        cubin = m.kernels[name].cubin
        kernel_rows[name] = {
            "template": k.template,
            "grid": list(k.grid),
            "schedule": {**k.constexprs, "num_warps": k.num_warps, "num_stages": k.num_stages},
            "schedule_origin": k.schedule_origin,
            "launches": dict(sorted(uses[name].items())),
            **({"cubin": cubin.file, "shared_bytes": cubin.shared} if cubin is not None else {}),
        }
    sections = m.to_sections()  # the model, limits and tuning records shown as stored
    fallbacks = m.schedules.fallbacks
    sizes = {name: art.files[w.file].size for name, w in m.weights.items() if w.file in art.files}
    return {
        "artifact": str(art.path),
        "packed": art.packed,
        "files": len(art.files),
        "bytes": sum(f.size for f in art.files.values()),
        "target": art.target,
        "versions": {"format": art.format_version, "inferx": art.compiler_version, "triton": art.triton_version},
        "model": sections["model"],
        "limits": sections["limits"],
        "tokenizer": list(m.tokenizer.files),
        "weights": _weights(m, sizes),
        "precision": art.manifest.get("precision"),
        "entries": entries,
        "kernels": kernel_rows,
        "tuned": dict(sorted(sections["schedules"]["tuned"].items())),
        "fallbacks": {
            "kernels": list(fallbacks),
            "note": m.schedules.note,
            "reasons": {n: f.reason for n, f in fallbacks.items()},
        },
    }


def _weights(m: Manifest, sizes: Mapping[str, int]) -> dict[str, Any]:
    """The stored weights' bytes, float and int4, and each int4 weight (its codes) with its
    scheme, [N, K] and bytes (codes, scales and minimums). The scheme is read from the launches
    that bind the codes (codes, then scales and minimums, as a qlinear's operands): the group is K
    over the scales' columns, a minimum makes it asymmetric; a weight the quantize pass named
    (``W.<scheme>.codes``) is listed under W."""
    from inferx.compiler.ir.quant import parse_quantized_name

    schemes: dict[str, tuple[str, list[str]]] = {}
    for entry in m.entries.values():
        for step in entry.launches:
            names = [b.name if b.kind == "weight" else "" for b in step.inputs]
            at = next((i for i, n in enumerate(names) if n and m.weights[n].dtype == "i4"), None)
            if at is None or at + 1 >= len(names):
                continue  # not a kernel of int4 codes
            codes, scales = names[at], names[at + 1]
            names = names[at:]
            if not scales or codes in schemes:
                continue
            per_group = m.weights[scales].shape
            rest = [n for n in names[2:] if n and m.weights[n].shape == per_group]  # a minimum, not col_scale
            k = m.weights[codes].shape[-1]
            scheme = f"int4-g{k // per_group[-1]}" + ("" if rest else "-sym")
            schemes[codes] = (scheme, [codes, scales, *rest])
    quantized: dict[str, dict[str, Any]] = {}
    parts: set[str] = set()
    for name, w in m.weights.items():
        if w.dtype != "i4":
            continue
        scheme, siblings = schemes.get(name, ("int4", [name]))
        parsed = parse_quantized_name(name)
        parts.update(siblings)
        quantized[parsed[0] if parsed else name] = {
            "scheme": scheme, "shape": list(w.shape), "bytes": sum(sizes.get(n, 0) for n in siblings)}
    codes_bytes = sum(sizes.get(n, 0) for n, w in m.weights.items() if w.dtype == "i4")
    return {
        "float_bytes": sum(b for n, b in sizes.items() if n not in parts),
        "int4_codes_bytes": codes_bytes,
        "int4_scales_bytes": sum(sizes.get(n, 0) for n in parts) - codes_bytes,
        "int4": dict(sorted(quantized.items())),
    }


def _precision_lines(doc: Mapping[str, Any] | None) -> list[str]:
    """The precision map's line: how many linears take each precision, and with a plan, the
    budget, the measured perplexity increase and the predicted weight-read times."""
    from inferx.compiler.quant.precision import summary

    if not isinstance(doc, Mapping) or not isinstance(doc.get("layers"), Mapping):
        return []
    line = f"precision  {summary(doc['layers'])} linears"
    plan = doc.get("planner")
    if not isinstance(plan, Mapping):
        return [line]
    us = plan.get("predicted_weight_us", {})
    others = ", ".join(f"{k} {v:.1f}" for k, v in us.items() if k != "plan")
    return [line + f", planned for a budget of +{plan['budget']:.2%} perplexity",
            f"           measured {plan['perplexity_increase']:+.2%}"
            + (f" (bound {plan['perplexity_increase_bound']:+.2%})" if "perplexity_increase_bound" in plan else "")
            + f" on {plan['windows']} windows of "
            f"{plan['window_tokens']} tokens of {plan['calibration']} (float perplexity {plan['float_perplexity']})",
            f"           predicted weight reads a decode step: {us.get('plan', 0):.1f} us ({others} us uniform)"]


def _count(items: list[str]) -> dict[str, int]:
    return dict(sorted(Counter(items).items()))


def _layer_span(entry: EntryPlan, num_layers: int) -> tuple[int, int] | None:
    """The [start, end) range of an entry's launches that belong to decoder layers, or None.

    Layer i begins at the first launch that reads its KV cache (the arguments named ``k{i}`` and
    ``v{i}``). Layers are alike, so each spans the distance between the first two starts; a lone
    layer ends at the launch that produces the logits. What is outside (embedding, final norm and
    LM head) are the non-layer launches."""
    index = {a.name: i for i, a in enumerate(entry.args)}
    launches = entry.launches
    starts = []
    for layer in range(num_layers):
        cache = {index.get(f"k{layer}"), index.get(f"v{layer}")} - {None}
        first = next(
            (n for n, step in enumerate(launches) if any(b.kind == "arg" and b.index in cache for b in step.inputs)),
            None,
        )
        if first is None:
            return None
        starts.append(first)
    if num_layers == 1:
        logits = entry.returns[0]
        end = next(
            (n for n, step in enumerate(launches) if logits.kind == "buffer" and logits in step.outputs), len(launches)
        )
        return (starts[0], end) if end > starts[0] else None
    period = starts[1] - starts[0]
    if period <= 0 or any(s != starts[0] + i * period for i, s in enumerate(starts)):
        return None
    end = starts[0] + num_layers * period
    return (starts[0], end) if end <= len(launches) else None


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    x = n / 1024
    for unit in ("KiB", "MiB"):
        if x < 1024:
            return f"{x:.1f} {unit}"
        x /= 1024
    return f"{x:.1f} GiB"


def _counts(c: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in c.items()) or "none"


def _table(rows: list[list[str]], indent: str, right: Callable[[int], bool] = lambda col: False) -> list[str]:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return [
        indent
        + "  ".join(
            cell.rjust(w) if right(c) else cell.ljust(w) for c, (cell, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]


def render_summary(s: Mapping[str, Any]) -> str:
    mdl, lim, ver = s["model"], s["limits"], s["versions"]
    form = "packed .ixa" if s["packed"] else "directory"
    lines = [
        f"artifact   {s['artifact']} ({form}, {s['files']} files, {_size(s['bytes'])})",
        f"target     {s['target']}",
        f"versions   inferx {ver['inferx']}, triton {ver['triton']}, artifact format {ver['format']}",
        f"model      {mdl['architecture']}: {mdl['num_layers']} layers, vocab {mdl['vocab_size']}, "
        f"{mdl['num_kv_heads']} KV heads x {mdl['head_dim']}, {mdl['dtype']}"
        f"{', KV cache ' + mdl['kv_dtype'] if mdl.get('kv_dtype') else ''}, max context {mdl['max_context']}, "
        f"eos {mdl['eos_token_ids']}",
        f"limits     max_batch {lim['max_batch']}, max_seq_len {lim['max_seq_len']}"
        + (f"; KV cache paged: {pg['blocks']} blocks of {pg['block_size']} positions, {pg['blocks_per_seq']} a "
           "sequence" if (pg := mdl.get("kv_paging")) else ""),
        f"tokenizer  {', '.join(s['tokenizer']) if s['tokenizer'] else 'none (token ids only)'}",
    ]
    w = s["weights"]
    lines.append(f"weights    {_size(w['float_bytes'])} float" + (
        f", {_size(w['int4_codes_bytes'])} int4 codes and {_size(w['int4_scales_bytes'])} of their scales "
        f"and minimums ({len(w['int4'])} int4 weights, listed below)" if w["int4"] else ""))
    lines += _precision_lines(s.get("precision"))
    for ename, e in s["entries"].items():
        lines += [
            "",
            f"entry {ename}: {e['launches']} launches of {e['distinct_kernels']} kernels ({_counts(e['by_template'])})",
        ]
        lay = e["layers"]
        if lay is None:
            lines.append("  per layer: no layer structure found")
        else:
            lines.append(
                f"  per layer: {lay['per_layer']} launches ({_counts(lay['per_layer_by_template'])}) "
                f"x {lay['num_layers']} layers; outside layers: {lay['non_layer']} "
                f"({_counts(lay['non_layer_by_template'])})"
            )
        if e["memory_plan"]:
            dims = sorted({d for b in e["memory_plan"] for d in b["dims"]})
            rows = [[*dims, "peak", "no-reuse", "KV cache"]]
            rows += [
                [
                    *(str(b["dims"].get(d, "")) for d in dims),
                    _size(b["peak_bytes"]),
                    _size(b["no_reuse_bytes"]),
                    _size(b["kv_bytes"]),
                ]
                for b in e["memory_plan"]
            ]
            lines.append("  memory plan (activation arena per bucket):")
            lines += _table(rows, "    ", right=lambda c: True)
    origins = Counter(k["schedule_origin"] for k in s["kernels"].values())
    lines += ["", f"kernels: {len(s['kernels'])} distinct ({_counts(dict(sorted(origins.items())))})"]
    rows = [["name", "template", "launches", "grid", "schedule", "origin"]]
    for name, k in s["kernels"].items():
        sched = " ".join(f"{key}={val}" for key, val in k["schedule"].items())
        used = " ".join(f"{en}:{n}" for en, n in k["launches"].items())
        rows.append([name, k["template"], used, " x ".join(k["grid"]), sched, k["schedule_origin"]])
    lines += _table(rows, "  ")
    tuned = s["tuned"]
    lines += ["", f"tuned: {len(tuned)} kernels on a schedule from the tuning database"]
    lines += [
        f"  {name}  {t['summary']}: {t['median_ms'] * 1e3:.1f} us measured {t['date']} ({t['source']})"
        + (f", borrowed: measured at {t['from_rows']} rows" if "from_rows" in t else "")
        + (", at sustained clocks" if t.get("regime") == "sustained" else "")
        for name, t in tuned.items()
    ]
    if w["int4"]:
        lines += ["", "int4 weights:"]
        rows = [["weight", "scheme", "[N, K]", "bytes"]]
        rows += [[n, q["scheme"], " x ".join(map(str, q["shape"])), _size(q["bytes"])] for n, q in w["int4"].items()]
        lines += _table(rows, "  ", right=lambda c: c == 3)
    fb = s["fallbacks"]
    lines += [
        "",
        f"fallbacks: {len(fb['kernels'])} kernels on a heuristic schedule" + (f" ({fb['note']})" if fb["note"] else ""),
    ]
    lines += [f"  {name}" + (f"  {fb['reasons'][name]}" if fb["reasons"].get(name) else "") for name in fb["kernels"]]
    return "\n".join(lines)
