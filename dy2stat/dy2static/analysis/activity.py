"""Activity analysis: which qualified names each statement and block reads and writes.

Requires: nothing (a `for` loop's EXTRA_TEST counts as read by its header). Attaches:
Static.SCOPE on every statement and on if/while tests,
BODY_SCOPE/ORELSE_SCOPE/FINALLY_SCOPE/COND_SCOPE/HEADER_SCOPE/ARGS_SCOPE on compound
statements and functions, SCOPE on `arguments` (the parameters, written at entry), and
Basic.QN on every Name/Attribute/Subscript that has a qualified name.

Attributes and constant subscripts are names: `self.h = v` writes `self.h` and reads `self`;
`x[i] = v` (non-constant key) mutates `x`. Calling a known mutating method on a name
(`lst.append(v)`, or an in-place tensor method such as `x.zero_()`) mutates it, and so
does passing it to a function that changes that argument in place
(`d2s.array_write(x, i, arr)`, `d2s.increment(i)`). Comprehensions, lambdas and nested
functions have their own locals; only their free names show in the enclosing scope.
"""

from __future__ import annotations

import gast

from dy2stat.dy2static import anno
from dy2stat.dy2static.analysis.qual_names import QN

# Methods that change the object they are called on (lists, dicts, sets).
MUTATING_METHODS = frozenset(
    "append extend insert pop remove clear sort reverse update setdefault popitem add "
    "discard difference_update intersection_update symmetric_difference_update".split()
)

def _mutates(method: str) -> bool:
    """Whether calling `method` changes its object: a list/dict/set method that does, or a
    tensor method named for an in-place change (`zero_`, `fill_`, `add_`, as in Paddle and
    PyTorch)."""
    return method in MUTATING_METHODS or (method.endswith("_") and not method.endswith("__"))


# Functions that change an argument in place: name -> (its position, its keyword).
MUTATING_FUNCTIONS = {"array_write": (2, "array"), "increment": (0, "x")}


class Scope:
    """Names a block reads and writes; `isolated` scopes (functions) keep their locals."""

    def __init__(self, parent: Scope | None = None, isolated: bool = False) -> None:
        self.parent = parent
        self.isolated = isolated
        self.read: set[QN] = set()
        self.written: set[QN] = set()
        self.mutated: set[QN] = set()
        self.deleted: set[QN] = set()
        self.params: set[QN] = set()
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        self.closure_reads: set[QN] = set()

    @property
    def modified(self) -> set[QN]:
        """Everything whose value may change: written, mutated in place, or deleted."""
        return self.written | self.mutated | self.deleted

    @property
    def local_names(self) -> set[str]:
        """For a function scope: the plain names local to it (parameters included)."""
        bound = {q for q in self.written | self.deleted | self.params if not q.is_composite}
        return bound - self.globals - self.nonlocals

    def merge_into(self, other: Scope) -> None:
        for field in (
            "read",
            "written",
            "mutated",
            "deleted",
            "globals",
            "nonlocals",
            "closure_reads",
        ):
            getattr(other, field).update(getattr(self, field))

    def __repr__(self) -> str:
        parts = [
            f"{f}={sorted(getattr(self, f))}"
            for f in ("read", "written", "mutated", "deleted", "params")
            if getattr(self, f)
        ]
        return f"Scope({', '.join(parts)})"


def _mutated_base(node: gast.AST) -> QN | None:
    """The longest qualified prefix of an assignment target that has no QN itself."""
    while isinstance(node, (gast.Attribute, gast.Subscript)):
        node = node.value
        qn = QN.from_ast(node)
        if qn is not None:
            return qn
    return None


class _Analyzer(gast.NodeVisitor):
    def __init__(self) -> None:
        self.scope = Scope(isolated=True)

    def _enter(self, isolated: bool = False) -> Scope:
        self.scope = Scope(self.scope, isolated)
        return self.scope

    def _exit(self, deferred: bool = False) -> Scope:
        """Leave the current scope, passing what is visible outside it to the parent.

        `deferred`: the scope runs later (function, lambda), so its free reads are closure reads.
        """
        scope, parent = self.scope, self.scope.parent
        self.scope = parent
        if not scope.isolated:
            scope.merge_into(parent)
            return scope
        local = scope.local_names
        free = {q for q in scope.read | scope.closure_reads if q.root not in local}
        parent.read.update(free)
        captured = free if deferred else {q for q in scope.closure_reads if q.root not in local}
        parent.closure_reads.update(captured)
        parent.mutated.update(q for q in scope.modified if q.root not in local)
        return scope

    def _block(self, stmts: list[gast.stmt]) -> Scope:
        self._enter()
        for stmt in stmts:
            self.visit(stmt)
        return self._exit()

    def visit(self, node: gast.AST) -> None:
        if isinstance(node, gast.stmt):
            self._enter()
            super().visit(node)
            anno.setanno(node, anno.Static.SCOPE, self._exit())
        else:
            super().visit(node)

    # Names.

    def _access(self, node: gast.AST, qn: QN, ctx: gast.AST) -> None:
        anno.setanno(node, anno.Basic.QN, qn)
        self.scope.read.update(qn.ancestors)
        if isinstance(ctx, gast.Load):
            self.scope.read.add(qn)
        elif isinstance(ctx, gast.Store):
            self.scope.written.add(qn)
        elif isinstance(ctx, gast.Del):
            self.scope.deleted.add(qn)
        elif isinstance(ctx, gast.Param):
            self.scope.params.add(qn)

    def visit_Constant(self, node: gast.Constant) -> None:
        pass  # a leaf (see transformer.Base.visit_Constant)

    def visit_Name(self, node: gast.Name) -> None:
        self._access(node, QN.name(node.id), node.ctx)

    def _visit_composite(self, node: gast.Attribute | gast.Subscript) -> None:
        qn = QN.from_ast(node)
        if qn is not None:
            self._access(node, qn, node.ctx)
            return
        if not isinstance(node.ctx, gast.Load):
            base = _mutated_base(node)
            if base is not None:
                self.scope.mutated.add(base)
        self.generic_visit(node)

    visit_Attribute = visit_Subscript = _visit_composite

    def visit_Call(self, node: gast.Call) -> None:
        func = node.func
        if isinstance(func, gast.Attribute):
            # A method call reads the object, not `obj.method`.
            qn = QN.from_ast(func.value)
            if qn is not None and _mutates(func.attr):
                self.scope.mutated.add(qn)
            self.visit(func.value)
        else:
            self.visit(func)
        self._mutated_argument(node)
        for arg in node.args + node.keywords:
            self.visit(arg)

    def _mutated_argument(self, node: gast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, gast.Attribute) else getattr(func, "id", None)
        if name not in MUTATING_FUNCTIONS:
            return
        position, keyword = MUTATING_FUNCTIONS[name]
        args = [k.value for k in node.keywords if k.arg == keyword]
        if len(node.args) > position:
            args.append(node.args[position])
        for arg in args:
            qn = QN.from_ast(arg)
            if qn is not None:
                self.scope.mutated.add(qn)

    # Statements.

    def visit_Assign(self, node: gast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AugAssign(self, node: gast.AugAssign) -> None:
        self.visit(node.value)
        qn = QN.from_ast(node.target)
        if qn is not None:
            self._access(node.target, qn, gast.Load())
        self.visit(node.target)

    def visit_AnnAssign(self, node: gast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self.visit(node.target)

    def visit_Global(self, node: gast.Global) -> None:
        self.scope.globals.update(node.names)

    def visit_Nonlocal(self, node: gast.Nonlocal) -> None:
        self.scope.nonlocals.update(node.names)

    def visit_Import(self, node: gast.Import | gast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self.scope.written.add(QN.name(alias.asname or alias.name.split(".")[0]))

    visit_ImportFrom = visit_Import

    def _test(self, node: gast.If | gast.While) -> None:
        self._enter()
        self.visit(node.test)
        cond = self._exit()
        anno.setanno(node.test, anno.Static.SCOPE, cond)
        anno.setanno(node, anno.Static.COND_SCOPE, cond)
        anno.setanno(node, anno.Static.BODY_SCOPE, self._block(node.body))
        anno.setanno(node, anno.Static.ORELSE_SCOPE, self._block(node.orelse))

    visit_If = visit_While = _test

    def visit_For(self, node: gast.For) -> None:
        self._enter()
        # A loop test added by a pass (break/return flags) is read with the iter, each time.
        extra = anno.getanno(node, anno.Transform.EXTRA_TEST, None)
        for part in (node.iter, node.target, extra):
            if part is None:
                continue
            self._enter()
            self.visit(part)
            anno.setanno(part, anno.Static.SCOPE, self._exit())
        anno.setanno(node, anno.Static.HEADER_SCOPE, self._exit())
        anno.setanno(node, anno.Static.BODY_SCOPE, self._block(node.body))
        anno.setanno(node, anno.Static.ORELSE_SCOPE, self._block(node.orelse))

    visit_AsyncFor = visit_For

    def visit_With(self, node: gast.With) -> None:
        self._enter()
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.visit(item.optional_vars)
        anno.setanno(node, anno.Static.HEADER_SCOPE, self._exit())
        anno.setanno(node, anno.Static.BODY_SCOPE, self._block(node.body))

    visit_AsyncWith = visit_With

    def visit_Try(self, node: gast.Try) -> None:
        anno.setanno(node, anno.Static.BODY_SCOPE, self._block(node.body))
        for handler in node.handlers:
            self._enter()
            if handler.type is not None:
                self.visit(handler.type)
            if handler.name is not None:
                self.visit(handler.name)
            anno.setanno(handler, anno.Static.HEADER_SCOPE, self._exit())
            anno.setanno(handler, anno.Static.BODY_SCOPE, self._block(handler.body))
        anno.setanno(node, anno.Static.ORELSE_SCOPE, self._block(node.orelse))
        anno.setanno(node, anno.Static.FINALLY_SCOPE, self._block(node.finalbody))

    visit_TryStar = visit_Try

    def visit_Match(self, node: gast.Match) -> None:
        self._enter()
        self.visit(node.subject)
        for case in node.cases:
            for child in gast.walk(case.pattern):
                for name in (getattr(child, "name", None), getattr(child, "rest", None)):
                    if isinstance(name, str):
                        self.scope.written.add(QN.name(name))
                if isinstance(child, gast.expr):
                    self.visit(child)
            if case.guard is not None:
                self.visit(case.guard)
        anno.setanno(node, anno.Static.HEADER_SCOPE, self._exit())
        for case in node.cases:
            anno.setanno(case, anno.Static.BODY_SCOPE, self._block(case.body))

    # Functions, classes, lambdas, comprehensions: their own locals.

    def _arguments(self, args: gast.arguments) -> None:
        self._enter()
        params = args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]
        for param in params:
            if param is not None:
                self._access(param, QN.name(param.id), gast.Param())
        scope = self._exit()
        scope.written = set(scope.params)
        anno.setanno(args, anno.Static.SCOPE, scope)
        self.scope.params.update(scope.params)

    def visit_FunctionDef(self, node: gast.FunctionDef | gast.Lambda) -> None:
        for expr in getattr(node, "decorator_list", []) + node.args.defaults:
            self.visit(expr)
        for expr in node.args.kw_defaults:
            if expr is not None:
                self.visit(expr)
        if isinstance(node, gast.Lambda):
            self._enter(isolated=True)
            self._arguments(node.args)
            self.visit(node.body)
        else:
            self.scope.written.add(QN.name(node.name))
            self._enter(isolated=True)
            self._arguments(node.args)
            self._block(node.body)
        anno.setanno(node, anno.Static.ARGS_SCOPE, anno.getanno(node.args, anno.Static.SCOPE))
        deferred = not anno.getanno(node, anno.Transform.CALLED_AT_ONCE, False)
        anno.setanno(node, anno.Static.BODY_SCOPE, self._exit(deferred=deferred))

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef

    def visit_ClassDef(self, node: gast.ClassDef) -> None:
        for expr in node.decorator_list + node.bases + node.keywords:
            self.visit(expr)
        self.scope.written.add(QN.name(node.name))
        self._enter(isolated=True)
        self._block(node.body)
        anno.setanno(node, anno.Static.BODY_SCOPE, self._exit())

    def _comprehension(self, node: gast.AST) -> None:
        self._enter(isolated=True)
        for gen in node.generators:
            self.visit(gen.iter)
            self.visit(gen.target)
            for cond in gen.ifs:
                self.visit(cond)
        for field in ("elt", "key", "value"):
            if hasattr(node, field):
                self.visit(getattr(node, field))
        anno.setanno(node, anno.Static.BODY_SCOPE, self._exit())

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension


def resolve(node: gast.AST) -> gast.AST:
    """Annotate `node` (a function, lambda, module or statement) and everything in it."""
    analyzer = _Analyzer()
    if isinstance(node, gast.Module):
        anno.setanno(node, anno.Static.BODY_SCOPE, analyzer._block(node.body))
    else:
        analyzer.visit(node)
    return node


_HEADERS = (gast.For, gast.AsyncFor, gast.With, gast.AsyncWith, gast.ExceptHandler, gast.Match)


def node_scope(node: gast.AST) -> Scope:
    """What the CFG node made from `node` reads and writes: a for header reads its iter (its
    target is a node of its own), with/except/match headers their HEADER_SCOPE, anything
    else its SCOPE (KeyError if activity has not run)."""
    if isinstance(node, (gast.For, gast.AsyncFor)):
        scope = anno.getanno(node.iter, anno.Static.SCOPE)
        extra = anno.getanno(node, anno.Transform.EXTRA_TEST, None)
        if extra is None:
            return scope
        merged = Scope()
        scope.merge_into(merged)
        anno.getanno(extra, anno.Static.SCOPE).merge_into(merged)
        return merged
    key = anno.Static.HEADER_SCOPE if isinstance(node, _HEADERS) else anno.Static.SCOPE
    return anno.getanno(node, key)
