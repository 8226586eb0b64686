"""The compiler: IR, frontends, code generation and the driver."""
