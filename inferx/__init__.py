"""InferX: an LLM compiler for NVIDIA Hopper GPUs."""
