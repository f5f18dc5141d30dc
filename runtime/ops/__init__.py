"""Op families; importing this package registers every op."""

from dy2stat.runtime.ops import (  # noqa: F401
    control_flow,
    conv,
    creation,
    debug,
    fused,
    indexing,
    manipulation,
    math,
    nn,
    norm,
    optimizer,
)
