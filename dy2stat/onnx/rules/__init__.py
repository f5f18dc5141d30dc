"""The ONNX rules of every op family; importing this package fills ``lowering.RULES``
and ``lowering.REFUSED``."""

from dy2stat.onnx.rules import (  # noqa: F401
    control_flow,
    creation,
    elementwise,
    indexing,
    linalg,
    manipulation,
    nn,
    reduction,
    refused,
)
