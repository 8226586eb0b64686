"""The code generator's error type."""


class CodegenError(ValueError):
    """A kernel no template can implement; names the kernel, the op and the reason."""
