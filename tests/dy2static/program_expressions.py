"""The expressions of the generated programs (program_generator.py): of each kind, Python and
tensor predicates, conditional expressions and helper calls, each with whether it may be a
static Variable in the converted code."""

from __future__ import annotations

import dataclasses

DYADIC = (-1.5, -1.0, -0.5, -0.25, 0.25, 0.5, 1.0, 1.5, 2.0)
THRESHOLDS = (-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0)


@dataclasses.dataclass(frozen=True)
class Expr:
    text: str
    static: bool  # may be a static Variable in the converted code

    def __str__(self) -> str:
        return self.text


class Expressions:
    """Writes expressions over a scope (name -> kind). Needs from the function writer: gen
    (features, helpers, used), rnd, attrs (self.<name> -> kind), layers, dyn (Python names
    that may be static), python_only, and names(scope, kind)."""

    lambda_depth = 0  # inside an operand the converter makes a lambda (if-expression, and/or)

    def mark(self, feature: str, text: str) -> str:
        self.gen.used.add(feature)
        return text

    def scalar_literal(self) -> Expr:
        return Expr(str(self.rnd.choice(DYADIC)), False)

    def atom(self, scope, kind: str) -> Expr | None:
        names = self.names(scope, kind) + [a for a, k in self.attrs.items() if k == kind]
        if not names:
            return None
        name = self.rnd.choice(names)
        return Expr(name, kind in "TS" or self.may_be_static(name))

    def expr(self, kind: str, scope: dict, depth: int = 0) -> Expr:
        return getattr(self, f"expr_{kind}")(scope, depth)

    def expr_T(self, scope, depth) -> Expr:
        gen, rnd = self.gen, self.rnd
        if depth >= 2 or rnd.random() < 0.3:
            return self.atom(scope, "T")
        a = lambda: self.expr_T(scope, depth + 1)  # noqa: E731
        forms = [
            lambda: f"({a()} + {a()})",
            lambda: f"({a()} - {a()})",
            lambda: f"({a()} * {self.scalar_literal()})",
            lambda: f"d2s.tanh({a()})",
            lambda: f"nn.functional.relu({a()})",
            lambda: f"{a()}.abs()",
            lambda: f"d2s.sigmoid({a()})",
            lambda: f"({a()} * d2s.tanh({a()}))",
            lambda: f"({a()} + {self.expr_S(scope, depth + 1)})",
            lambda: f"d2s.where({a()} > {rnd.choice(THRESHOLDS)}, {a()}, {a()})",
            lambda: f"d2s.maximum({a()}, {a()})",
        ]
        if "mixed_scalars" in gen.features:
            f = lambda: self.expr_F(scope, depth + 1)  # noqa: E731
            i = lambda: self.expr_I(scope, depth + 1)  # noqa: E731
            forms += [lambda: self.mark("mixed_scalars", f"({a()} * {f()})"),
                      lambda: self.mark("mixed_scalars", f"({a()} + {i()})")]
        if "habits" in gen.features:
            forms += [lambda: self.mark("habits", f"d2s.add({a()}, {a()})"),
                      lambda: self.mark("habits", f"{a()}.clamp(-2.0, 2.0)"),
                      lambda: self.mark("habits", f"({a()} * {self.expr_S(scope, depth + 1)}"
                                                  f".item())")]
        if self.layers:
            forms.append(lambda: f"{rnd.choice(self.layers)}({a()})")
        blocks = self.names(scope, "M")
        if blocks and (not self.lambda_depth or "layer_call_in_lambda" in gen.features):
            call = lambda: f"{rnd.choice(blocks)}({a()})"  # noqa: E731
            forms.append(lambda: self.mark("layer_call_in_lambda", call()) if self.lambda_depth
                         else call())
        if self.names(scope, "L") and "lists" in gen.features:
            lists = self.names(scope, "L")
            forms += [lambda: f"{rnd.choice(lists)}[-1]",
                      lambda: f"{rnd.choice(lists)}[0]",
                      lambda: f"d2s.stack({rnd.choice(lists)}).sum(axis=0)",
                      lambda: f"d2s.stack({rnd.choice(lists)}).mean(axis=0)"]
        if "ifexp" in gen.features:
            forms.append(lambda: self.ifexp("T", scope, depth))
        if "helpers" in gen.features and self.helpers_for("T"):
            forms.append(lambda: self.call(scope, depth + 1, "T"))
        text = rnd.choice(forms)()
        return text if isinstance(text, Expr) else Expr(text, True)

    def expr_S(self, scope, depth) -> Expr:
        rnd = self.rnd
        names = self.names(scope, "S")
        if names and (depth >= 2 or rnd.random() < 0.3):
            return Expr(rnd.choice(names), True)
        t = self.expr_T(scope, depth + 1)
        forms = [f"{t}.sum()", f"{t}.mean()", f"{t}.max()", f"{t}.min()",
                 f"({t} * {self.expr_T(scope, depth + 1)}).sum()"]
        if names:
            forms += [f"({rnd.choice(names)} + {self.scalar_literal()})",
                      f"({rnd.choice(names)} * {self.scalar_literal()})"]
        # (max/min and and/or of tensors are Python's own in not_to_static code: left out)
        if "habits" in self.gen.features and depth < 2 and rnd.random() < 0.2 and not (
                getattr(self, "python_only", False)):
            u = self.expr_T(scope, depth + 1)
            return Expr(self.mark("habits", rnd.choice((
                f"max({t}.sum(), {u}.mean())", f"min({t}.max(), {u}.min())",
                f"({t}.mean() or {u}.sum())", f"({t}.max() and {u}.min())"))), True)
        if "mixed_scalars" in self.gen.features and depth < 2 and rnd.random() < 0.3:
            return Expr(self.mark("mixed_scalars", f"({rnd.choice(forms)} + "
                                                    f"{self.expr_F(scope, depth + 1)})"), True)
        if "helpers" in self.gen.features and self.helpers_for("S") and depth < 2:
            call = self.call(scope, depth + 1, "S")
            if call is not None:
                forms.append(call.text)
        return Expr(rnd.choice(forms), True)

    def expr_I(self, scope, depth) -> Expr:
        rnd = self.rnd
        atom = self.atom(scope, "I")
        if atom is None or rnd.random() < 0.3:
            return Expr(str(rnd.randint(0, 3)), False)
        if depth >= 2 or rnd.random() < 0.5:
            return atom
        other = self.expr_I(scope, depth + 1)
        forms = [f"({atom} + 1)", f"({atom} - {other})", f"({atom} * 2)", f"({atom} + {other})"]
        lists = self.names(scope, "L")
        if lists and "lists" in self.gen.features:
            name = rnd.choice(lists)
            forms.append(f"len({name})")
            return Expr(rnd.choice(forms), atom.static or other.static or self.may_be_static(name))
        return Expr(rnd.choice(forms), atom.static or other.static)

    def expr_F(self, scope, depth) -> Expr:
        rnd = self.rnd
        atom = self.atom(scope, "F")
        if atom is None or rnd.random() < 0.25:
            return self.scalar_literal()
        if depth >= 2 or rnd.random() < 0.5:
            return atom
        i = self.expr_I(scope, depth + 1)
        forms = [(f"({atom} * 0.5)", atom.static), (f"({atom} + {i})", atom.static or i.static),
                 (f"({atom} - {self.scalar_literal()})", atom.static)]
        text, static = rnd.choice(forms)
        return Expr(text, static)

    def expr_B(self, scope, depth) -> Expr:
        return self.python_predicate(scope, depth)

    def python_predicate(self, scope, depth=0) -> Expr:
        gen, rnd = self.gen, self.rnd
        i, f = self.expr_I(scope, depth + 1), self.expr_F(scope, depth + 1)
        b = self.atom(scope, "B")
        forms = [(f"{i} > {rnd.randint(0, 2)}", i.static), (f"{f} < {rnd.choice(THRESHOLDS)}",
                                                             f.static)]
        if b is not None:
            forms += [(b.text, b.static)] * 2
        if "logic" in gen.features and depth < 1 and rnd.random() < 0.5:
            gen.used.add("logic")
            p = lambda: self.python_predicate(scope, depth + 1)  # noqa: E731
            p1, p2 = p(), p()
            forms += [(f"(not {p1})", p1.static),
                      (f"({p1} and {p2})", p1.static or p2.static),
                      (f"({p1} or {p2})", p1.static or p2.static),
                      (f"(0 <= {i} < {rnd.randint(1, 3)})", i.static)]
        text, static = rnd.choice(forms)
        return Expr(text, static)

    def tensor_predicate(self, scope, depth=0) -> Expr:
        gen, rnd = self.gen, self.rnd
        logic = "logic" in gen.features and depth < 1 and rnd.random() < 0.6
        self.lambda_depth += logic  # and/or operands become lambdas
        s = self.expr_S(scope, depth + 1)
        self.lambda_depth -= logic
        forms = [f"{s} > {rnd.choice(THRESHOLDS)}", f"{s} < {rnd.choice(THRESHOLDS)}"]
        if "mixed_scalars" in gen.features and rnd.random() < 0.3:
            return Expr(self.mark("mixed_scalars", f"{s} > {self.expr_F(scope, depth + 1)}"),
                         True)
        if logic:
            gen.used.add("logic")
            p = self.python_predicate(scope, depth + 1)
            self.lambda_depth += 1
            t2 = self.tensor_predicate(scope, depth + 1)
            self.lambda_depth -= 1
            lo = rnd.choice(THRESHOLDS[:3])
            forms += [f"(not ({s} > {rnd.choice(THRESHOLDS)}))",
                      f"({lo} < {s} < {lo + rnd.choice((0.5, 1.0, 2.0))})",
                      f"({s} > {rnd.choice(THRESHOLDS)} or {p})",
                      f"({p} and {s} < {rnd.choice(THRESHOLDS)})",
                      f"({t2} and {s} > {rnd.choice(THRESHOLDS)})",
                      f"({t2} or not {p})"]
        if "opt" in scope and depth < 1:
            forms.append(f"({s} > {rnd.choice(THRESHOLDS)} or opt is None or opt > "
                         f"{rnd.choice(THRESHOLDS)})")
        return Expr(rnd.choice(forms), True)

    def predicate(self, scope) -> Expr:
        if self.python_only or self.rnd.random() < 0.35:
            return self.python_predicate(scope)
        return self.tensor_predicate(scope)

    def ifexp(self, kind: str, scope, depth) -> Expr:
        self.gen.used.add("ifexp")
        pred = self.predicate(scope)
        self.lambda_depth += 1  # the branches become lambdas
        a, b = self.expr(kind, scope, depth + 1), self.expr(kind, scope, depth + 1)
        self.lambda_depth -= 1
        return Expr(f"({a} if {pred} else {b})", pred.static or a.static or b.static)

    def helpers_for(self, returns: str) -> list:
        """The helpers returning `returns` this code may call (not_to_static code: only other
        not_to_static helpers, since what it calls is not converted either)."""
        return [h for h in self.gen.helpers if h.returns == returns
                and (h.python_only or not self.python_only)]

    def call(self, scope, depth, kind) -> Expr | None:
        """A call of a helper returning `kind` (any kind for None)."""
        helpers = self.helpers_for(kind) if kind else self.gen.helpers
        if not helpers:
            return None
        helper = self.rnd.choice(helpers)
        args = []
        for i, k in enumerate(helper.params):
            if helper.python_only and k in "IFB":
                args.append(repr(self.rnd.choice(DYADIC) if k == "F" else
                                 self.rnd.choice((True, False)) if k == "B" else
                                 self.rnd.randint(0, 3)))
            elif k == "I" and i > 0:  # the helper's range bound: keep it small
                args.append(str(self.rnd.randint(0, 3)))
            else:
                args.append(str(self.expr(k, scope, depth + 1)))
        self.gen.used.add("helpers")
        return Expr(f"{helper.name}({', '.join(args)})", True)
