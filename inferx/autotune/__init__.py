"""The auto-tuner: schedule spaces, cost models, search, tuning database (not built yet)."""
