"""Shrinking a failing generated program, and writing it as a script that reproduces it.

`shrink` removes statements (or replaces a compound statement with one of its bodies) and
drops argument sets while the failure stays of the same kind, keeping only programs that are
`well_formed`: what the generator guarantees (no read of a local some path leaves unbound,
counted while loops, a return at the end of each function) must hold of the smaller ones too,
or a "reproducer" would show a program that is wrong in eager Python as well.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses

import numpy as np

from tests.dy2static.program_generator import Program


def shrink(program: Program, failure, run, budget: int = 300):
    """A smaller program (and argument sets) that fails the same way under `run`
    (program, inputs) -> failure or None.

    Tries dropping argument sets, then each statement (a body left empty becomes `pass`),
    then replacing a compound statement with one of its bodies; keeps what is well formed
    and still fails with the same kind of failure.
    """
    inputs = list(program.inputs)
    if failure.call >= 0:
        for candidate in ([inputs[failure.call]], inputs[:failure.call + 1]):
            again = run(program, candidate)
            if again is not None and again.kind == failure.kind:
                inputs = candidate
                break
    source = program.source
    tries = 0
    changed = True
    while changed and tries < budget:
        changed = False
        for candidate in _smaller(source):
            if not well_formed(ast.parse(candidate)):
                continue
            tries += 1
            if tries > budget:
                break
            smaller = dataclasses.replace(program, source=candidate)
            again = run(smaller, inputs)
            if again is not None and again.kind == failure.kind:
                source, failure, changed = candidate, again, True
                break
    return dataclasses.replace(program, source=source, inputs=inputs), failure


def _smaller(source: str):
    """Sources with one statement removed or one compound statement replaced by a body."""
    sites = [(b, i, len(_replacements(stmt)))
             for b, body in enumerate(_bodies(ast.parse(source))) for i, stmt in enumerate(body)]
    for b, i, count in sites:
        for r in range(count):
            tree = ast.parse(source)
            body = _bodies(tree)[b]
            body[i:i + 1] = _replacements(body[i])[r]
            if not body:
                body.append(ast.Pass())
            yield ast.unparse(tree) + "\n"


def _bodies(tree: ast.AST) -> list[list]:
    return [getattr(node, field) for node in ast.walk(tree) for field in ("body", "orelse")
            if isinstance(getattr(node, field, None), list) and getattr(node, field)]


def _replacements(stmt: ast.stmt) -> list[list]:
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return []
    out = [[]]
    if isinstance(stmt, ast.If):
        out += [b for b in (stmt.body, stmt.orelse) if b]
    elif isinstance(stmt, (ast.For, ast.While, ast.With, ast.Try)):
        out.append(stmt.body)
    return out


def well_formed(tree: ast.Module) -> bool:
    """What the generator guarantees and shrinking must keep: no function reads a local name
    that some path leaves unbound, and every `while` body starts by counting its test's
    counter up."""
    module_names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    module_names |= {(a.asname or a.name).split(".")[0] for n in tree.body
                     if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    methods = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    methods += [m for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body
                if isinstance(m, ast.FunctionDef)]
    for node in ast.walk(tree):
        if isinstance(node, ast.While):
            first = node.body[0]
            counters = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
            if not (isinstance(first, ast.AugAssign) and isinstance(first.op, ast.Add)
                    and isinstance(first.target, ast.Name) and first.target.id in counters):
                return False
        if isinstance(node, ast.FunctionDef):
            if node.name != "__init__" and not _always_returns(node.body):
                return False
            params = {a.arg for a in node.args.args + [node.args.vararg, node.args.kwarg] if a}
            local = params | {n.id for n in ast.walk(node)
                              if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            nested = [n for n in ast.walk(node) if isinstance(n, ast.FunctionDef)][1:]
            loaded = {n.id for n in ast.walk(node)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            if node in methods and not nested and \
                    loaded - local - module_names - set(dir(builtins)):
                return False  # a name nothing binds (shrinking removed its assignments)
            try:
                _defined_after(node.body, params, local)
            except NameError:
                return False
    return True


def _always_returns(stmts: list) -> bool:
    last = stmts[-1]
    if isinstance(last, ast.If):
        return _always_returns(last.body) and bool(last.orelse) and \
            _always_returns(last.orelse)
    if isinstance(last, ast.Try):
        return _always_returns(last.body) and all(_always_returns(h.body)
                                                  for h in last.handlers)
    return isinstance(last, ast.Return)


def _defined_after(stmts: list, defined: set, local: set) -> set | None:
    """The names defined after `stmts` (None: they never fall through); NameError where a
    statement may read an unbound local."""
    defined = set(defined)

    def read(*nodes):
        for node in nodes:
            for n in ast.walk(node) if node is not None else ():
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and \
                        n.id in local and n.id not in defined:
                    raise NameError(n.id)

    for stmt in stmts:
        if isinstance(stmt, (ast.Return, ast.Break, ast.Continue)):
            read(getattr(stmt, "value", None))
            return None
        if isinstance(stmt, ast.If):
            read(stmt.test)
            arms = [_defined_after(stmt.body, defined, local),
                    _defined_after(stmt.orelse, defined, local)]
            arms = [a for a in arms if a is not None]
            if not arms:
                return None
            defined = set.intersection(*arms)
        elif isinstance(stmt, (ast.While, ast.For)):
            read(stmt.test if isinstance(stmt, ast.While) else stmt.iter)
            inner = set(defined)
            if isinstance(stmt, ast.For):
                inner |= {n.id for n in ast.walk(stmt.target) if isinstance(n, ast.Name)}
            _defined_after(stmt.body, inner, local)
        elif isinstance(stmt, ast.Try):
            arms = [_defined_after(stmt.body, defined, local)]
            arms += [_defined_after(h.body, defined, local) for h in stmt.handlers]
            arms = [a for a in arms if a is not None]
            if not arms:
                return None
            defined = set.intersection(*arms)
        elif isinstance(stmt, ast.With):
            read(*stmt.items)
            after = _defined_after(stmt.body, defined, local)
            if after is None:
                return None
            defined = after
        elif isinstance(stmt, (ast.Assign, ast.AugAssign)):
            read(stmt.value)
            if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and \
                    stmt.target.id in local and stmt.target.id not in defined:
                raise NameError(stmt.target.id)
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                defined |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            defined.add(stmt.name)
        else:
            read(stmt)
    return defined


def reproducer(program: Program, failure) -> str:
    """A script (save it to a file: the transpiler reads the source) that shows the failure:
    the outputs, and the gradients of their sum, eager and converted."""
    if program.layer:
        setup = ("eager = Model()\nconverted = Model()\n"
                 "converted.set_state_dict(eager.state_dict())\nd2s.jit.to_static(converted)\n")
    else:
        setup = "eager, converted = main, d2s.jit.to_static(main)\n"
    call = "fn(*args)"
    if "kwargs_call" in program.features:
        named = ", ".join(f"{n}=args[{i}]" for i, n in reversed(list(enumerate(program.params))))
        call = f"fn({named})"
    mutate = ""
    if "mutate_attribute" in program.features and program.layer:
        mutate = ("    if i == 1:  # the attribute the forward reads changes\n"
                  "        eager.threshold = converted.threshold = -eager.threshold\n")
    args = ",\n    ".join(_args_text(a) for a in program.inputs)
    return (f"# dy2stat equivalence property, seed {program.seed}: {failure.kind}\n"
            f"# {failure.detail.splitlines()[0] if failure.detail else ''}\n"
            f"import numpy as np\n{program.source}\n\n{setup}"
            f"for i, values in enumerate([\n    {args},\n]):\n{mutate}"
            "    for name, fn in ((\"eager\", eager), (\"converted\", converted)):\n"
            "        args = [d2s.to_tensor(np.array(a, dtype=np.float32), stop_gradient=False)\n"
            "                if isinstance(a, list) else a for a in values]\n"
            f"        out = {call}\n"
            "        leaves = [o for o in (out if isinstance(out, tuple) else (out,))\n"
            "                  if not o.stop_gradient]\n"
            "        grads = d2s.grad(sum(o.sum() for o in leaves), args[:2], allow_unused=True)"
            " if leaves else None\n"
            "        print(name, out, grads)\n")


def _args_text(args: tuple) -> str:
    return "(" + ", ".join(repr(a.tolist()) if isinstance(a, np.ndarray) else repr(a)
                           for a in args) + ")"
