"""Test-wide settings, read in this one place.

CPU sessions run the artifact's kernels in Triton's interpreter, which Triton decides when it is
first imported: the tests enable it before anything imports Triton. (Compiling cubins happens in
worker processes, which set their own mode.) No test reaches the network.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
