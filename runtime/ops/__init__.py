"""Op families; importing this package registers every op."""

from dy2stat.runtime.ops import (  # noqa: F401
    control_flow,
    conv,
    creation,
    debug,
    elementwise,
    fused,
    grids,
    indexing,
    linalg,
    manipulation,
    math,
    nn,
    norm,
    optimizer,
    reduction,
    resample,
    selection,
    sorting,
    tensor_array,
)
