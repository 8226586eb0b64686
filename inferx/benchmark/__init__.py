"""`inferx bench`: InferX side by side with PyTorch eager, HF transformers and torch.compile.

What lives where:
- ``shapes``: the model shapes (exact HF config values) and random-weight checkpoints made on the device.
- ``llama``: a plain PyTorch Llama with a static KV cache (the eager and torch.compile peer).
- ``roofline``: bytes and FLOPs a step must move and do, and the measured copy and matmul ceilings.
- ``floor``: the launch floor: fixed cost per launch and read rate of chained plain streaming
  kernels (``floor_kernel``), measured and fitted, and what it puts under a chain of N kernels.
- ``peers``: timing with device events, and each peer's decode and prefill steps.
- ``run``: the benchmark's flow, one shape at a time, into a results dictionary.
- ``report``: the tables printed and the JSON written.
- ``main``: behind ``inferx bench``: options from their text, the GPU check, the run, the output.

Nothing here is imported by the compiler or the runtime.
"""
