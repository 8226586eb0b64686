"""Seeded fuzzing of every input InferX reads from a file: artifacts (directory and packed
``.ixa``), manifests, config.json, safetensors headers, the shard index, GGUF metadata, IR text
and tuning records.

Each case is a (kind, seed) pair: the seed alone decides how a valid base input (``seeds``) is
mutated (``mutators``, ``formats``; hashes and offsets fixed up where a mutation should reach past
the sha256 checks), and the kind decides which entry point reads it (``cases``): ``inferx
inspect`` and ``inferx.load`` with one prefill and decode on the CPU for artifacts,
``inferx.import_model`` and every weight read for checkpoints, ``inferx opt`` with the file's
pipeline for IR, ``Database.load`` and ``best`` for tuning records. A case ends ``ok`` (a valid
result) or ``clean`` (one of the errors the CLI prints as one ``error:`` line, with a message);
anything else is ``bad``: another exception, a wrong result, an input the trust model refuses
accepted, a hang past the deadline, a crash of the process, or a file touched outside the
case's directory and the kernel cache (``harness`` runs cases in sandboxed worker processes).

Run (from the repository root)::

    python -m tests.fuzz                          # the CI set: every kind, its CI count of seeds
    python -m tests.fuzz --cases 200000 -j 8      # the long mode: seeds spread over the kinds
    python -m tests.fuzz --kind gguf --seed 12    # one case again, with its traceback
    python -m tests.fuzz --kind gguf --seed 12 --keep /tmp/case   # and its input kept
    python -m tests.fuzz --kind ir --first 5000 --count 1000      # seeds 5000..5999 of a kind

``tests/test_fuzz.py`` runs the CI set and prints a repro line like the third for each bad case.
"""
