"""Decoder-LLM definitions, one file per architecture family (not built yet)."""
