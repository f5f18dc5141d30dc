"""Op families; importing this package registers every op."""

from dy2stat.runtime.ops import (  # noqa: F401
    control_flow,
    creation,
    debug,
    fused,
    manipulation,
    math,
    nn,
    optimizer,
)
