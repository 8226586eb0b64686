"""Passes over `ix` IR. The registry is explicit: a pass is listed here or it does not exist.

These are the IR passes; the compile pipeline (``inferx.compiler.pipeline``) adds bind-families
and the passes kernel families bring.
"""

from __future__ import annotations

from xdsl.passes import ModulePass


def registry() -> dict[str, type[ModulePass]]:
    """Every pass by its pipeline name."""
    from inferx.passes.canonicalize import Canonicalize
    from inferx.passes.cse import CSE
    from inferx.passes.dce import DCE
    from inferx.passes.fold_norm_weights import FoldNormWeights
    from inferx.passes.fuse import Fuse
    from inferx.passes.interleave_pairs import InterleavePairs
    from inferx.passes.merge_gemms import MergeGemms
    from inferx.passes.norm_stats import NormStats
    from inferx.passes.page_kv import PageKV
    from inferx.passes.plan_memory import PlanMemory
    from inferx.passes.quantize import Quantize
    from inferx.passes.quantize_fp8 import QuantizeFp8
    from inferx.passes.quantize_kv import QuantizeKV
    from inferx.passes.settle_dynamic_rope import SettleDynamicRope

    return {p.name: p for p in (Canonicalize, CSE, DCE, Quantize, QuantizeFp8, QuantizeKV, PageKV, MergeGemms,
                                InterleavePairs, FoldNormWeights, Fuse, NormStats, SettleDynamicRope, PlanMemory)}
