"""The auto-tuner. Built: tuning task keys (``task.py``) and the tuning database
(``database.py``), which phase 7 of the compiler reads. Not built yet: schedule spaces, cost
models, search, the runner."""
