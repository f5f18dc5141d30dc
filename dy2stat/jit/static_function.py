"""``StaticFunction``: a converted function, traced once per input signature.

Each call binds its arguments to the function's parameters and describes them as a cache
key (``arguments``: shapes and dtypes of the tensors and arrays it feeds, values of Python
arguments) together with the layer's train/eval mode. Under one key the cache keeps the
programs traced for it, each with the guards of what its trace read (``guards``): the
first whose guards hold runs. When none does, the call converts the function's source (once),
traces it into a new static program and compiles it; the retrace log says why (an argument
or a value read changed). After every run the trace's writes -- buffers, attributes,
globals it set, gradients -- are made again with the run's values (``trace_record.Effects``).

A function whose trace made a training step (``loss.backward()``, ``opt.step()``, read
or set gradients: ``step_record``) runs as one program with no tape node: before each
run its host inputs are read (learning rates, gradients kept from before) and its
scheduler steps made, in trace order.

Tracing state is per thread (``dy2stat.mode``); a lock makes one thread at a time trace a
given function, while other threads keep running the programs already cached.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import operator
import threading
import types
import weakref

from dy2stat.jit import arguments, settings
from dy2stat.jit.program_runner import ProgramRunner
from dy2stat.jit.repeat_call import RepeatCall
from dy2stat.jit.step_record import argument_grad_error
from dy2stat.jit.trace_record import TraceRecord, recording
from dy2stat.mode import state
from dy2stat.runtime import codegen
from dy2stat.runtime.ir import Program
from dy2stat.runtime.lower import tier
from dy2stat.static import framework, nest
from dy2stat.static.builder import captured_tensors
from dy2stat.static.variable import Variable

log = logging.getLogger("dy2stat")


class ConcreteProgram:
    """One traced program: its inputs, outputs, runner, and what its trace assumed."""

    def __init__(self, program: Program, inputs: list, outputs, runner: ProgramRunner,
                 n_outputs: int, guards, effects, identities: list, reaching=()):
        self.main_program = program
        self.inputs = inputs  # data Variables, in flattened-argument order
        self.outputs = outputs  # the output structure with Variables (or Python values)
        self.runner = runner
        self.n_outputs = n_outputs  # the runner's first fetches; the effects' come after
        self.guards = guards  # what the trace read (dy2stat.jit.guards.Guards)
        self.effects = effects  # what it wrote (dy2stat.jit.trace_record.Effects)
        self.identities = identities  # argument objects the program is specific to
        self.pack = _packer(outputs)  # the run's output tensors -> the output structure
        # A training step's backward reaches these arguments: (position, name, where).
        self.reaching = list(reaching)

    @property
    def parameters(self) -> list:
        return list(self.runner.captured.values())

    @property
    def feed_names(self) -> list[str]:
        return self.runner.feed_names

    @property
    def fetch_names(self) -> list[str]:
        """The fetches that are the function's outputs."""
        return self.runner.fetch_names[:self.n_outputs]

    def check_arguments(self, feeds: list) -> None:
        """A training step cannot keep the gradient of an argument that needs one."""
        for i, name, where in self.reaching:
            if not feeds[i].stop_gradient:
                raise argument_grad_error(name, where)

    def valid_for(self, identities: list) -> bool:
        if identities or self.identities:
            if len(identities) != len(self.identities) or not all(
                    map(operator.is_, identities, self.identities)):
                return False
        return self.guards.hold()


@contextlib.contextmanager
def _first_call():
    """Around a trace and its first run: Python's cycle collector off (a trace allocates
    far past its thresholds, and each full collection walks every object of the
    process), the native tier's background builds held back (``tier.foreground``), and
    the BLAS libraries looked up meanwhile (``codegen.look_up_blas_soon``)."""
    codegen.look_up_blas_soon()
    with tier.foreground.tracing():
        collecting = gc.isenabled()  # a collector the user turned off stays off
        gc.disable()
        try:
            yield
        finally:
            if collecting:
                gc.enable()


def _packer(outputs):
    """A function of the fetched tensors giving what the function returns."""
    if isinstance(outputs, Variable):
        return operator.itemgetter(0)
    flat = nest.flatten(outputs)

    def pack(outs):
        leaves = iter(outs)
        return nest.pack_as(outputs, [next(leaves) if isinstance(v, Variable) else v
                                      for v in flat])

    return pack


class ProgramCache:
    """The programs a StaticFunction traced, by cache key (``StaticFunction.program_cache``)."""

    def __init__(self):
        self._programs: dict = {}  # key -> [ConcreteProgram], most recent last
        self.repeat: RepeatCall | None = None  # the latest call's, when it can repeat

    def __len__(self) -> int:
        return sum(len(v) for v in self._programs.values())

    def __bool__(self) -> bool:
        return bool(self._programs)

    def __contains__(self, key) -> bool:
        return key in self._programs

    def keys(self) -> list:
        return list(self._programs)

    def concrete_programs(self) -> list[ConcreteProgram]:
        return [c for v in self._programs.values() for c in v]

    def find(self, key, identities: list) -> ConcreteProgram | None:
        """The program for ``key`` whose guards hold now, if any."""
        for concrete in self._programs.get(key, ()):
            if concrete.valid_for(identities):
                return concrete
        return None

    def last(self) -> tuple:
        """``(key, (concrete_program, runner))`` of the program traced last (Paddle's)."""
        if not self._programs:
            raise RuntimeError("the program cache is empty: nothing has been traced yet")
        key = next(reversed(self._programs))
        concrete = self._programs[key][-1]
        return key, (concrete, concrete.runner)

    def under(self, key) -> list[ConcreteProgram]:
        return list(self._programs.get(key, ()))

    def add(self, key, concrete: ConcreteProgram) -> None:
        self._programs.setdefault(key, []).append(concrete)

    def clear(self) -> None:
        self._programs.clear()
        self.repeat = None


class StaticFunction:
    """What ``to_static`` returns for a function or method."""

    def __init__(self, function, input_spec=None, instance=None, convert_source=True):
        self._function = function
        self._convert_source = convert_source
        self._instance = instance
        self._input_spec = arguments.as_specs(input_spec)
        self._signature = None  # arguments.Signature, made at the first call
        self._parameter_specs: list = []  # the input_spec, one item per parameter
        # The number of parameters when a call giving each a Tensor by position may take
        # the fast path of __call__ (no input_spec, no *args or keywords); else -1.
        self._tensors_only = -1
        self.program_cache = ProgramCache()
        self._lock = threading.RLock()  # one trace at a time
        self._local = threading.local()  # per thread: the key of its latest call
        self._bound: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._warned_limit = False
        functools.update_wrapper(self, function)

    # ---------------------------------------------------------- descriptor
    def __get__(self, instance, owner=None):
        """Methods: one StaticFunction per instance, sharing nothing but the function."""
        if instance is None:
            return self
        bound = self._bound.get(instance)
        if bound is None:
            bound = StaticFunction(self._function, self._input_spec, instance,
                                   self._convert_source)
            self._bound[instance] = bound
        return bound

    # ---------------------------------------------------------------- call
    def __call__(self, *args, **kwargs):
        if not settings.state.enabled:
            return self._call_eagerly(args, kwargs)
        if state.static:
            # Called while another program is being built: trace inline into it.
            function = (settings.convert(self._function) if self._convert_source
                        else self._function)
            if self._instance is not None:
                return function(self._instance, *args, **kwargs)
            return function(*args, **kwargs)
        instance = self._instance
        training = None if instance is None else getattr(instance, "training", None)
        repeat = self.program_cache.repeat
        if repeat is not None and not kwargs and not state.grad_enabled:
            outs = repeat.run(args, training)
            if outs is not None:
                self._local.last_key = repeat.key
                settings.state.last_function = self
                return outs
        if len(args) == self._tensors_only and not kwargs:
            # Every parameter given a Tensor by position: the key Arguments would make.
            key = arguments.tensors_key(args)
            if key is not None:
                key = (key, training)
                for concrete in self.program_cache._programs.get(key, ()):
                    if concrete.valid_for(()):  # Tensors are fed, never held by identity
                        self._keep_repeat(key, concrete, args, args)
                        return self._run(concrete, key, args)
        bound = self._bind(args, kwargs)
        described = arguments.Arguments(self.__name__, bound, self._parameter_specs)
        key = (described.key, training)
        for concrete in self.program_cache._programs.get(key, ()):  # ProgramCache.find
            if concrete.valid_for(described.identities):
                if not kwargs and not described.identities:
                    self._keep_repeat(key, concrete, args, described.feeds)
                return self._run(concrete, key, described.feeds)
        with _first_call():  # a trace makes many objects and keeps most of them
            concrete = self._trace_for(key, bound, described)
            if concrete is not None:  # its first run compiles a plan
                return self._run(concrete, key, described.feeds)
        return self._call_eagerly(args, kwargs)  # over the cache size limit: run as written

    def _keep_repeat(self, key, concrete: ConcreteProgram, args: tuple, feeds: list) -> None:
        """Let the next calls repeating this one (``repeat_call``) run its plan directly."""
        if not state.grad_enabled:
            self.program_cache.repeat = RepeatCall.of(key, concrete, args, feeds)

    def _run(self, concrete: ConcreteProgram, key, feeds):
        self._local.last_key = key
        settings.state.last_function = self
        if concrete.reaching:
            concrete.check_arguments(feeds)
        outs = concrete.runner(feeds)
        if concrete.effects:
            concrete.effects.apply(outs[concrete.n_outputs:])
        return concrete.pack(outs)

    def _call_eagerly(self, args, kwargs):
        if self._instance is not None:
            return self._function(self._instance, *args, **kwargs)
        return self._function(*args, **kwargs)

    def _bind(self, args, kwargs) -> list:
        if self._signature is None:
            self._signature = arguments.Signature(self._function, self._instance is not None)
            self._parameter_specs = self._signature.per_parameter(self._input_spec)
            if self._signature.all_positional and not any(self._parameter_specs):
                self._tensors_only = len(self._signature.names)
        return self._signature.bind(args, kwargs)

    # -------------------------------------------------------------- caching
    def _trace_for(self, key, bound, described) -> ConcreteProgram | None:
        """Trace for ``key`` (unless another thread just did); None past the size limit."""
        with self._lock:
            concrete = self.program_cache.find(key, described.identities)
            if concrete is not None:
                return concrete
            reasons = self._retrace_reasons(key)
            if len(self.program_cache) >= settings.state.cache_size_limit:
                self._warn_limit(reasons)
                return None
            if reasons is not None:
                settings.log_retrace(self.__name__, reasons)
            concrete = self._trace(bound, described, self._parameter_specs)
            self.program_cache.add(key, concrete)
            return concrete

    def _retrace_reasons(self, key) -> list[str] | None:
        """Why a call with ``key`` traces again (None: the first trace)."""
        if not self.program_cache:
            return None
        earlier = self.program_cache.under(key)
        if earlier:  # the program that missed by the fewest changes explains it best
            changes = min((c.guards.changes() for c in earlier), key=len)
            return changes or ["a value the trace read changed"]
        last = getattr(self._local, "last_key", None)
        if last is None:
            last = self.program_cache.keys()[-1]
        return settings.key_changes(last, key, self._signature.names)

    def _warn_limit(self, reasons) -> None:
        if self._warned_limit:
            return
        self._warned_limit = True
        why = "; ".join(reasons or []) or "new input signatures"
        log.warning(
            "%s has traced %d programs (the cache size limit): calls that need another "
            "run as written, eagerly. What keeps changing: %s. Give changing tensor dims "
            "as None in an input_spec, or pass changing Python values as tensors "
            "(d2s.jit.set_cache_size_limit raises the limit)",
            self.__name__, len(self.program_cache), why)

    # -------------------------------------------------------------- tracing
    def _trace(self, bound, described, specs) -> ConcreteProgram:
        converted = (settings.convert(self._function) if self._convert_source
                     else self._function)
        program = Program()
        record = TraceRecord(self._instance, bound)
        with framework.program_guard(program, Program()), framework.static_guard(True):
            static_bound, inputs = arguments.placeholders(program, bound, specs)
            call_args, call_kwargs = self._signature.call_arguments(static_bound)
            try:
                with recording(record):
                    if self._instance is not None:
                        with framework.layer_scope(self._instance):
                            outputs = converted(self._instance, *call_args, **call_kwargs)
                    else:
                        outputs = converted(*call_args, **call_kwargs)
            finally:
                written = record.undo()
        guards, effects = record.conclude(written)
        fetches = [v.name for v in nest.flatten(outputs) if isinstance(v, Variable)]
        steps = record.steps
        feeds = [v.name for v in inputs] + steps.input_names
        runner = ProgramRunner(program, feeds, fetches + effects.fetches,
                               dict(captured_tensors(program)),
                               prologue=steps.prologue if steps else None)
        settings.dump_program(self.__name__, program)
        position = {v.name: i for i, v in enumerate(inputs)}
        reaching = [(position[n], n, where) for n, where in steps.reaching.items()]
        return ConcreteProgram(program, inputs, outputs, runner, len(fetches), guards,
                               effects, described.identities, reaching)

    # ------------------------------------------------------------ inspection
    @property
    def dygraph_function(self):
        """The original (eager) function."""
        return self._function

    @property
    def code(self) -> str:
        """The converted source code."""
        return settings.converted_code(self._function)

    @property
    def concrete_program(self) -> ConcreteProgram:
        """The program of this thread's latest call (traced from the input_spec if none)."""
        key = getattr(self._local, "last_key", None)
        if key is None or key not in self.program_cache:
            if not self._input_spec:
                raise RuntimeError(
                    f"{self.__name__} has not been called yet and has no input_spec: "
                    "call it once, or pass input_spec to to_static")
            return self._trace_from_specs(self._input_spec)
        return self.program_cache.under(key)[-1]

    @property
    def main_program(self) -> Program:
        """The static program of the latest call (or of the input_spec)."""
        return self.concrete_program.main_program

    def get_concrete_program(self, *args, **kwargs) -> tuple[ConcreteProgram, ProgramRunner]:
        """``(concrete_program, runner)`` for these arguments (InputSpecs stand for
        tensors), traced if needed but not run (as Paddle's: the runner is called with the
        list of input tensors)."""
        concrete = self._concrete_for_arguments(args, kwargs)
        return concrete, concrete.runner

    def _concrete_for_arguments(self, args, kwargs) -> ConcreteProgram:
        if not args and not kwargs:
            return self.concrete_program_for_specs()
        bound = self._bind(args, kwargs)
        specs = [v if arguments.has_spec(v) else spec
                 for (_, v), spec in zip(bound, self._parameter_specs)]
        bound = [(n, arguments.example_value(v)) for n, v in bound]
        return self._concrete_for(bound, specs)

    def concrete_program_for_specs(self, input_spec=None) -> ConcreteProgram:
        """Trace (or reuse) the program for ``input_spec`` without running it."""
        specs = arguments.as_specs(input_spec) or self._input_spec
        if not specs:
            return self.concrete_program
        return self._trace_from_specs(specs)

    concrete_program_specify_input_spec = concrete_program_for_specs  # Paddle's name

    def _trace_from_specs(self, specs) -> ConcreteProgram:
        examples = [arguments.example_value(s) for s in specs]
        try:
            bound = self._bind(tuple(examples), {})
        except TypeError as exc:  # more or fewer specs than the function has inputs
            names = ", ".join(self._signature.names)
            raise TypeError(f"{self.__name__}({names}): input_spec gives {len(specs)} "
                            f"input{'s' * (len(specs) != 1)}: {exc}") from None
        return self._concrete_for(bound, self._signature.per_parameter(specs))

    def _concrete_for(self, bound, specs) -> ConcreteProgram:
        described = arguments.Arguments(self.__name__, bound, specs)
        key = (described.key, getattr(self._instance, "training", None))
        with self._lock:
            concrete = self.program_cache.find(key, described.identities)
            if concrete is None:
                concrete = self._trace(bound, described, specs)
                self.program_cache.add(key, concrete)
        self._local.last_key = key
        return concrete

    def rollback(self):
        """Back to the eager function: undo to_static and return the original."""
        if self._instance is None:
            return self._function
        original = types.MethodType(self._function, self._instance)
        self._instance.__dict__[self._function.__name__] = original
        return original

    def __repr__(self) -> str:
        return f"<StaticFunction {self.__name__}>"
