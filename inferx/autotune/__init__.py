"""The auto-tuner, as small interfaces each with a trivial implementation beside the clever one:

- ``task.py``: tuning task keys (GEMM and attention); ``database.py``: the append-only tuning database phase 7 reads;
  ``failures.py``: failed candidates beside it, so a resumed run does not retry them.
- ``extract.py``: a model's tasks and their weights (launches per token, roofline share).
- ``space.py``: knobs, Hopper constraints that prune before building, sampling and mutation.
- ``cost_model.py``: the roofline model and the learned model (boosted trees, ``gbdt.py``).
- ``search.py``: random and evolutionary search, round-robin and gradient task schedulers, the
  budgeted, resumable tuning loop.
- ``runner.py``: the replay runner (recorded measurements) and the local GPU runner.
- ``tune.py``: ``inferx tune``. ``synthetic.py``: a recorded landscape for tests on the CPU.
"""
