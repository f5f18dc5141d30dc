"""Global switches read on every op: gradient recording and static mode."""


class _Mode:
    # Record eager ops on the autograd tape.
    grad_enabled = True
    # Ops append to the current static program instead of running.
    static = False


state = _Mode()
