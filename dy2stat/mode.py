"""Switches read on every op, one set per thread: gradient recording, static mode, and
the record of the trace being built.

Each thread starts eager, with gradients on and no trace: a ``no_grad`` block or a
trace in one thread never changes what ops do in another (a converted Layer can be
served from a thread pool).
"""

import threading


class _Mode(threading.local):
    # Record eager ops on the autograd tape.
    grad_enabled = True
    # Ops append to the current static program instead of running.
    static = False
    # While a converted function is traced: what the trace reads and writes outside its
    # arguments (attributes, globals, closure variables; dy2stat.jit.guards.TraceRecord).
    recorder = None


state = _Mode()
