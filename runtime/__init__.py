"""The program: IR, op registry, backward, passes, executor, serialization."""
