"""The runtime: loads artifacts and runs them (not built yet)."""
