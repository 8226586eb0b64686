"""``inferx serve``: an artifact behind an OpenAI-compatible HTTP API (``app``), its requests
batched continuously by ``inferx.runtime.engine``; tokenizers and stop strings in ``text``."""
