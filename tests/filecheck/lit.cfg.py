# lit configuration for the IR text tests: every .mlir file here is a test whose RUN lines
# call `inferx opt` and `filecheck` (the pure-Python FileCheck).
import os

import lit.formats

config.name = "inferx-ir"  # noqa: F821
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".mlir"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.environment["PATH"] = os.environ.get("PATH", "")  # noqa: F821
config.environment["PYTHONUNBUFFERED"] = "1"  # noqa: F821
