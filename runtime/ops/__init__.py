"""Op families; importing this package registers every op."""

from dy2stat.runtime.ops import control_flow, creation, manipulation, math, nn  # noqa: F401
