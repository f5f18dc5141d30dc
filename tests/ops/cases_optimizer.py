"""The optimizer update ops (cases live beside the optimizer tests)."""

from tests.optimizer.op_cases import CASES  # noqa: F401
