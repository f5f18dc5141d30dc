"""The shared corpus: small user functions with Python control flow, most of it tensor-dependent.

Every function is registered with `@case(input_set, ..., ops=...)`. An input set is a tuple
of arguments: NumPy arrays become tensors (eager Tensors, or `static.data` inputs when the
function is traced), anything else is passed as it is. The input sets of a case take
different branches and different numbers of iterations. `ops` names the control-flow ops a
static program of the function must contain ("cond", "while"): where a predicate depends on
tensor values, a converter that only traced one path must fail.

Used by the transpiler tests (test_corpus.py) and meant for the executor and gradient tests.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np

import dy2stat as d2s
from dy2stat.dy2static.convert_call_func import not_to_static


@dataclasses.dataclass
class Case:
    fn: Callable
    inputs: list[tuple]
    ops: frozenset[str]
    # Static shapes of the array arguments (-1: unknown), in order; None: the arrays' own.
    shapes: list | None = None
    # False: only the eager equivalence applies (the function is Python-only by design).
    static: bool = True
    # Compare outputs within this tolerance (float accumulation order may differ).
    rtol: float = 1e-5

    @property
    def name(self) -> str:
        return self.fn.__name__


CASES: list[Case] = []


def case(*inputs, ops=(), shapes=None, static=True):
    def register(fn):
        CASES.append(Case(fn, [i if isinstance(i, tuple) else (i,) for i in inputs],
                          frozenset(ops), shapes, static))
        return fn

    return register


def f32(*values) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def i64(value) -> np.ndarray:
    return np.array(value, dtype=np.int64)


POS, NEG, MIX = f32(1.0, 2.0, 3.0), f32(-1.0, -2.0, -3.0), f32(-1.0, 0.5, 2.0)
M2 = np.array([[1.0, -2.0], [3.0, 4.0], [-5.0, 6.0]], dtype=np.float32)


# --------------------------------------------------------------------- if / elif / else


@case(POS, NEG, MIX, ops={"cond"})
def if_else_basic(x):
    if x.sum() > 0:
        y = x * 2
    else:
        y = x - 1
    return y


@case(POS, NEG, ops={"cond"})
def if_one_armed(x):
    y = x + 0
    if x.mean() > 0:
        y = y + 10
    return y


@case(f32(10, 1), f32(1, 1), f32(-3, 1), ops={"cond"})
def if_elif_else(x):
    s = x.sum()
    if s > 5:
        r = x * 3
    elif s > 0:
        r = x * 2
    else:
        r = -x
    return r


@case(f32(10, 1), f32(2, 1), f32(0.5, 0), f32(-3, 1), ops={"cond"})
def if_elif_chain_long(x):
    s = x.sum()
    if s > 8:
        k = 4.0
    elif s > 2:
        k = 3.0
    elif s > 0:
        k = 2.0
    else:
        k = 1.0
    return x * k


@case((POS, POS), (POS, NEG), (NEG, POS), ops={"cond"})
def if_nested(x, y):
    if x.sum() > 0:
        if y.sum() > 0:
            r = x + y
        else:
            r = x - y
    else:
        r = y * 3
    return r


@case(POS, NEG, ops={"cond"})
def if_several_outputs(x):
    if x.sum() > 0:
        a = x + 1
        b = x * 2
        c = a + b
    else:
        a = x - 1
        b = x / 2
        c = a - b
    return a, b, c


@case(POS, NEG, ops={"cond"})
def if_branch_local_temporaries(x):
    if x.sum() > 0:
        t = x * 2
        u = t + 1
        y = u * u
    else:
        v = x - 1
        y = v * 3
    return y


@case(POS, NEG, ops={"cond"})
def if_var_in_one_branch_not_used_after(x):
    y = x
    if x.sum() > 0:
        z = x * 5
        y = z + 1
    return y


@case((POS, True), (POS, False), ops=())
def if_python_predicate(x, flag):
    if flag:
        y = x + 1
    else:
        y = x - 1
    return y


@case((POS, 3), (POS, -3), ops=())
def if_python_number_compare(x, k):
    if k > 0:
        return x * k
    return x


@case(POS, NEG, ops={"cond"})
def if_and_of_tensors(x):
    if x.sum() > 0 and x.max() < 10:
        y = x + 1
    else:
        y = x - 1
    return y


@case(POS, NEG, f32(0, 0, 0), ops={"cond"})
def if_or_of_tensors(x):
    if x.sum() > 1 or x.min() < -1:
        y = x * 2
    else:
        y = x
    return y


@case(POS, NEG, ops={"cond"})
def if_not_tensor(x):
    if not x.sum() > 0:
        y = -x
    else:
        y = x
    return y


@case(POS, f32(0, 0, 0), ops={"cond"})
def if_number_tensor_predicate(x):
    if x.sum():
        y = x + 1
    else:
        y = x - 1
    return y


@case(POS, NEG, ops={"cond"})
def if_number_vs_tensor_output(x):
    if x.sum() > 0:
        y = 1.0
    else:
        y = x.sum()
    return y * 2


@case(POS, NEG, ops={"cond"})
def if_int_vs_float_numbers(x):
    if x.sum() > 0:
        k = 1
    else:
        k = 2.5
    return x * k


@case(POS, NEG, ops={"cond"})
def if_python_values_become_tensors(x):
    count = 0
    if x.sum() > 0:
        count = count + 1
    return x * count


@case(POS, NEG, ops={"cond"})
def if_bool_flag_output(x):
    found = False
    if x.max() > 2.5:
        found = True
    return found


@case(POS, NEG, ops={"cond"})
def if_unchanged_python_object(x):
    mode = "scale"
    factor = 3
    if x.sum() > 0:
        y = x * factor
    else:
        y = x
    return y, mode


@case(POS, NEG, ops={"cond"})
def if_list_state(x):
    values = [x, x * 2]
    if x.sum() > 0:
        values[0] = x + 100
    return values[0] + values[1]


@case(POS, NEG, ops={"cond"})
def if_tuple_output(x):
    if x.sum() > 0:
        pair = (x, x + 1)
    else:
        pair = (x - 1, x)
    return pair[0] * pair[1]


@case(POS, NEG, ops={"cond"})
def if_dict_state(x):
    d = {"a": x, "b": x * 0}
    if x.sum() > 0:
        d["b"] = x * 3
    return d["a"] + d["b"]


@case(POS, NEG, ops={"cond"})
def if_reads_var_modified_in_other_branch(x):
    y = x
    if x.sum() > 0:
        y = x * 2
    else:
        z = y + 1
        y = z * z
    return y


@case(POS, NEG, ops={"cond"})
def if_reassigned_twice(x):
    if x.sum() > 0:
        h = x + 1
    else:
        h = x - 1
    if x.max() > 1:
        h = x * 10
    else:
        h = x * 20
    return h


@case(POS, NEG, MIX, ops={"cond"})
def if_in_python_loop(x):
    y = x
    for _ in range(3):
        if y.sum() > 0:
            y = y - 1
        else:
            y = y + 2
    return y


@case(M2, M2 * -1, ops={"cond"})
def if_matrix(x):
    w = x.transpose([1, 0])
    if (x @ w).sum() > 0:
        out = x @ w
    else:
        out = w @ x
    return out


@case(POS, NEG, ops={"cond"})
def if_pass_branch(x):
    y = x
    if x.sum() > 0:
        pass
    else:
        y = -x
    return y


# ------------------------------------------------------------- conditional expressions


@case(POS, NEG, ops={"cond"})
def ifexp_basic(x):
    return x * 2 if x.sum() > 0 else x - 1


@case((POS, True), (POS, False), ops=())
def ifexp_python(x, flag):
    y = x + 1 if flag else x - 1
    return y


@case(f32(10), f32(1), f32(-1), ops={"cond"})
def ifexp_nested(x):
    return x * 3 if x.sum() > 5 else (x * 2 if x.sum() > 0 else -x)


@case(POS, NEG, ops={"cond"})
def ifexp_numbers(x):
    k = 1.0 if x.sum() > 0 else 2.0
    return x * k


@case(POS, NEG, ops={"cond"})
def ifexp_in_call(x):
    return d2s.exp(x if x.sum() < 0 else -x)


@case(POS, NEG, ops={"cond"})
def ifexp_in_branch(x):
    if x.mean() > 0:
        y = x + (1.0 if x.max() > 2 else 0.0)
    else:
        y = x
    return y


@case((POS, None), (POS, 2.0), ops=())
def ifexp_none_default(x, scale):
    s = scale if scale is not None else 1.0
    return x * s


@case(POS, NEG, ops={"cond"})
def ifexp_tuple(x):
    a, b = (x, x + 1) if x.sum() > 0 else (x - 1, x)
    return a + b


# ---------------------------------------------------------------------------- while


@case((POS, i64(3)), (POS, i64(0)), (NEG, i64(5)), ops={"while"})
def while_tensor_bound(x, n):
    i = 0
    s = x * 0
    while i < n:
        s = s + x
        i += 1
    return s, i


@case((POS, 3), (POS, 0), ops=())
def while_python_bound(x, n):
    i = 0
    s = x
    while i < n:
        s = s * 2
        i += 1
    return s


@case(f32(1), f32(7), f32(200), ops={"while"})
def while_tensor_value(x):
    while x.sum() < 100:
        x = x * 2
    return x


@case((f32(1), i64(4)), (f32(2), i64(1)), ops={"while"})
def while_several_carried(x, n):
    i = 0
    a = x
    b = x * 0
    c = x + 1
    while i < n:
        a, b = b + 1, a * 2
        c = c + a - b
        i = i + 1
    return a, b, c


@case((POS, i64(3)), (NEG, i64(2)), ops={"while"})
def while_loop_local_temporary(x, n):
    i = 0
    acc = x * 0
    while i < n:
        t = x * i
        u = t + 1
        acc = acc + u
        i += 1
    return acc


@case((f32(2), i64(3)), (f32(3), i64(2)), ops={"while"})
def while_nested(x, n):
    i = 0
    acc = x * 0
    while i < n:
        j = 0
        while j < i:
            acc = acc + x
            j += 1
        i += 1
    return acc


@case((POS, i64(3)), (POS, i64(0)), ops={"while"})
def while_int_counter_accumulates_float(x, n):
    i = 0
    total = 0
    while i < n:
        total = total + x.sum()
        i += 1
    return total


@case((f32(1.0), i64(5)), (f32(50.0), i64(5)), ops={"while"})
def while_mixed_predicate(x, n):
    i = 0
    while i < n and x.sum() < 20:
        x = x + 3
        i += 1
    return x, i


@case(f32(0.5), f32(3.0), ops={"while"})
def while_python_counter_with_tensor_stop(x):
    # A Python loop whose test turns into a tensor part-way: continues as a while op.
    i = 0
    done = False
    while i < 10 and not done:
        x = x * 2
        done = x.sum() > 4
        i += 1
    return x


@case((POS, i64(2)), (POS, i64(4)), ops={"while", "cond"})
def while_with_if(x, n):
    i = 0
    y = x
    while i < n:
        if y.sum() > 10:
            y = y - 5
        else:
            y = y * 2
        i += 1
    return y


@case((f32(3), i64(6)), (f32(1), i64(2)), ops={"while"})
def while_tensor_counter(x, n):
    i = d2s.zeros([], "int64")
    while i < n:
        x = x + i.astype("float32") * 1
        i = i + 1
    return x


# ------------------------------------------------------------------------------ for


@case(POS, NEG, ops=())
def for_range_int(x):
    s = x * 0
    for i in range(4):
        s = s + x * i
    return s


@case((POS, i64(3)), (POS, i64(0)), (NEG, i64(5)), ops={"while"})
def for_range_tensor(x, n):
    s = x * 0
    for _i in range(n):
        s = s + x
    return s


@case((POS, i64(1), i64(4)), (POS, i64(2), i64(2)), ops={"while"})
def for_range_tensor_start_stop(x, a, b):
    s = x * 0
    for i in range(a, b):
        s = s + x * i
    return s


@case((POS, i64(6)), (POS, i64(1)), ops={"while"})
def for_range_tensor_step(x, n):
    s = x * 0
    for i in range(0, n, 2):
        s = s + i
    return s


@case((POS, i64(5)), (POS, i64(0)), ops={"while"})
def for_range_tensor_negative_step(x, n):
    s = x * 0
    for i in range(n, 0, -1):
        s = s * 2 + i
    return s


@case(M2, M2 * 2, ops={"while"})
def for_over_tensor_rows(x):
    s = x[0] * 0
    for row in x:
        s = s + row * row
    return s


@case(M2, ops={"while"}, shapes=[[-1, 2]])
def for_over_tensor_unknown_length(x):
    s = x[0] * 0
    for row in x:
        s = s + row
    return s


@case(POS, NEG, ops=())
def for_over_list(x):
    out = x
    for k in [1.0, 2.0, 3.0]:
        out = out * k
    return out


@case(POS, ops=())
def for_over_tuple_of_tensors(x):
    s = x * 0
    for t in (x, x * 2, x * 3):
        s = s + t
    return s


@case(POS, ops=())
def for_enumerate_list(x):
    s = x * 0
    for i, k in enumerate([3.0, 4.0]):
        s = s + x * k * i
    return s


@case(M2, ops={"while"})
def for_enumerate_tensor(x):
    s = x[0] * 0
    for i, row in enumerate(x):
        s = s + row * i
    return s


@case(POS, ops=())
def for_zip_lists(x):
    s = x * 0
    for a, b in zip([1.0, 2.0], [10.0, 20.0]):
        s = s + x * a + b
    return s


@case((M2, M2 * 3), ops={"while"})
def for_zip_tensors(x, y):
    s = x[0] * 0
    for a, b in zip(x, y):
        s = s + a * b
    return s


@case(POS, ops=())
def for_nested_python(x):
    s = x * 0
    for i in range(3):
        for j in range(i):
            s = s + x * j
    return s


@case((POS, i64(3)), (POS, i64(1)), ops={"while"})
def for_nested_tensor_outer(x, n):
    s = x * 0
    for _i in range(n):
        for j in range(2):
            s = s + x * (j + 1)
    return s


@case((POS, i64(3), i64(2)), (POS, i64(2), i64(0)), ops={"while"})
def for_nested_tensor_both(x, n, m):
    s = x * 0
    for _i in range(n):
        for _j in range(m):
            s = s + x
    return s


@case((POS, 4), (POS, 0), ops=())
def for_target_used_after(x, n):
    last = -1
    for i in range(n):
        last = i
    return x * last


@case(POS, ops=())
def for_over_dict_items(x):
    scales = {"a": 1.0, "b": 2.0}
    s = x * 0
    for _, v in scales.items():
        s = s + x * v
    return s


@case(M2, ops={"while", "cond"})
def for_tensor_rows_with_if(x):
    s = x[0] * 0
    for row in x:
        if row.sum() > 0:
            s = s + row
        else:
            s = s - row
    return s


@case((POS, i64(3)), ops={"while"})
def for_range_len_of_list(x, n):
    ws = [x, x * 2, x * 3]
    s = x * 0
    for i in range(len(ws)):
        s = s + ws[i]
    for _ in range(n):
        s = s + 1
    return s


@case(POS, ops=())
def for_else_without_break(x):
    for i in range(2):
        x = x + i
    else:
        x = x * 10
    return x


# ------------------------------------------------------------------ break / continue


@case(POS, NEG, ops=())
def break_python(x):
    s = x * 0
    for i in range(10):
        if i == 3:
            break
        s = s + x
    return s


@case(f32(1), f32(3), f32(100), ops={"while", "cond"})
def break_tensor_in_python_range(x):
    # The break depends on a tensor: after the first check the loop continues as a while op.
    s = x * 0
    for _i in range(10):
        if s.sum() > 10:
            break
        s = s + x
    return s


@case((f32(1), i64(10)), (f32(4), i64(10)), (f32(1), i64(2)), ops={"while"})
def break_tensor_while(x, n):
    i = 0
    s = x * 0
    while i < n:
        s = s + x
        if s.sum() > 6:
            break
        i += 1
    return s, i


@case(POS, ops=())
def continue_python(x):
    s = x * 0
    for i in range(5):
        if i % 2 == 0:
            continue
        s = s + x * i
    return s


@case((POS, i64(6)), (NEG, i64(6)), ops={"while", "cond"})
def continue_tensor(x, n):
    s = x * 0
    for i in range(n):
        if (x * i).sum() > 5:
            continue
        s = s + x
    return s


@case((f32(1), i64(10)), (f32(2), i64(10)), ops={"while", "cond"})
def break_and_continue(x, n):
    i = 0
    s = x * 0
    while i < n:
        i += 1
        if (i % 2) == 0:
            continue
        s = s + x
        if s.sum() > 4:
            break
    return s, i


@case((f32(1), i64(4)), (f32(3), i64(4)), ops={"while"})
def break_nested_inner(x, n):
    total = x * 0
    for i in range(n):
        for j in range(n):
            if j > i:
                break
            total = total + x
    return total


@case(POS, NEG, ops=())
def break_nested_python(x):
    total = x * 0
    for i in range(4):
        for j in range(4):
            if j >= i:
                break
            total = total + x
        if i == 2:
            break
    return total


@case(f32(1), f32(10), ops={"while", "cond"})
def for_else_with_tensor_break(x):
    s = x * 0
    for _i in range(5):
        s = s + x
        if s.sum() > 20:
            break
    else:
        s = s - 1
    return s


@case((POS, 3), (POS, 10), ops=())
def while_else_with_python_break(x, n):
    i = 0
    while i < 5:
        if i == n:
            break
        i += 1
    else:
        x = x * 100
    return x + i


@case(M2, M2 * -1, ops={"while", "cond"})
def break_in_tensor_rows(x):
    s = x[0] * 0
    for row in x:
        if row.sum() < 0:
            break
        s = s + row
    return s


@case(f32(1), f32(5), ops={"cond"})
def continue_in_python_loop_tensor_condition(x):
    s = x * 0
    for i in range(6):
        if (x * i).sum() > 6:
            continue
        s = s + i
    return s


# ----------------------------------------------------------------------- early return


@case(POS, NEG, ops={"cond"})
def return_in_if(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


@case(f32(10), f32(1), f32(-1), ops={"cond"})
def return_in_elif(x):
    s = x.sum()
    if s > 5:
        return x * 3
    elif s > 0:
        return x * 2
    y = -x
    return y


@case(POS, NEG, ops={"cond"})
def return_in_both_branches(x):
    if x.sum() > 0:
        y = x + 1
        return y
    else:
        return x - 1


@case(POS, NEG, ops={"cond"})
def return_nested_ifs(x):
    if x.sum() > 0:
        if x.max() > 2:
            return x * 3
        return x * 2
    return x


@case(f32(1), f32(4), f32(100), ops={"while", "cond"})
def return_in_python_loop(x):
    s = x * 0
    for _i in range(5):
        s = s + x
        if s.sum() > 8:
            return s * 10
    return s


@case((f32(1), i64(10)), (f32(5), i64(10)), (f32(1), i64(2)), ops={"while"})
def return_in_while(x, n):
    i = 0
    while i < n:
        x = x * 2
        if x.sum() > 16:
            return x
        i += 1
    return x - 1


@case((POS, True), (POS, False), ops=())
def return_python_branches(x, flag):
    if flag:
        return x
    return -x


@case((POS, 1), (POS, 5), ops=())
def return_in_python_loop_python_cond(x, k):
    for i in range(4):
        if i == k:
            return x * i
    return x


@case((POS, True), (POS, False), ops=(), static=False)
def return_none_on_one_path(x, flag):
    if flag:
        return x
    print("no value")


@case(POS, NEG, ops={"cond"})
def return_tuple_in_if(x):
    if x.sum() > 0:
        return x, x + 1
    return x - 1, x


@case(M2, M2 * -1, ops={"while", "cond"})
def return_in_tensor_rows(x):
    for row in x:
        if row.sum() > 0:
            return row
    return x[0] * 0


# ------------------------------------------------------------------- and / or / not


def _probe(log, value):
    log.append(1)
    return value


@case((POS, True), (POS, False), ops=(), static=False)
def and_short_circuit_python(x, flag):
    log = []
    r = _probe(log, flag) and _probe(log, x.sum() > 0)
    return r, len(log)


@case((POS, True), (POS, False), ops=(), static=False)
def or_short_circuit_python(x, flag):
    log = []
    r = _probe(log, flag) or _probe(log, x.sum() > 0)
    return r, len(log)


@case(POS, NEG, ops=())
def and_tensor_values(x):
    return (x.sum() > 0) and (x.max() > 2)


@case(POS, NEG, ops=())
def or_tensor_values(x):
    return (x.sum() > 0) or (x.min() < -2)


@case(POS, NEG, ops=())
def not_tensor_value(x):
    return not (x.sum() > 0)


@case((POS, None), (POS, 2.0), ops=())
def or_default_python(x, bias):
    b = bias or 0.0
    return x + b


@case((POS, 0), (POS, 2), ops=())
def and_python_numbers(x, k):
    return x * (k and 3)


@case(POS, NEG, ops=())
def and_or_mixed(x):
    return ((x.sum() > 0) and (x.max() > 1)) or (x.min() < -2.5)


@case(POS, NEG, ops={"cond"})
def and_python_then_tensor_in_if(x):
    enabled = True
    if enabled and x.sum() > 0:
        return x
    return -x


@case(POS, NEG, ops=())
def or_python_true_short_circuits_tensor(x):
    always = True
    if always or x.sum() > 0:
        y = x + 1
    else:
        y = x - 1
    return y


@case(f32(1), f32(5), f32(20), ops=())
def chained_comparison_tensor(x):
    return 2 < x.sum() < 10


@case((POS, 3), (POS, 30), ops=())
def chained_comparison_python(x, k):
    if 0 < k < 10:
        return x * k
    return x


@case(f32(1), f32(5), f32(20), ops={"cond"})
def chained_comparison_in_if(x):
    if 2 < x.sum() <= 10:
        y = x * 2
    else:
        y = x
    return y


@case((POS, None), (POS, 2.0), ops=())
def is_none_check(x, scale):
    if scale is None:
        return x
    return x * scale


@case((POS, "double"), (POS, "keep"), ops=())
def in_check(x, mode):
    if mode in ("double", "twice"):
        return x * 2
    return x


# ----------------------------------------------------------------------------- lists


@case((POS, i64(3)), (POS, i64(1)), ops={"while"})
def list_append_in_tensor_loop_then_stack(x, n):
    out = []
    for i in range(n):
        out.append(x * i)
    return d2s.stack(out)


@case((POS, i64(2)), ops={"while"})
def list_with_first_element_in_tensor_loop(x, n):
    out = [x]
    i = 0
    while i < n:
        out.append(out[-1] * 2)
        i += 1
    return d2s.concat(out)


@case(POS, ops=())
def list_append_in_python_loop(x):
    out = []
    for i in range(3):
        out.append(x + i)
    return d2s.stack(out)


@case((POS, i64(3)), ops={"while"})
def list_len_after_tensor_loop(x, n):
    out = []
    for _ in range(n):
        out.append(x)
    return len(out)


@case(POS, ops=())
def list_pop_python(x):
    items = [x, x * 2, x * 3]
    last = items.pop()
    return last + len(items)


@case(M2, ops={"while"})
def list_append_rows_then_stack(x):
    out = []
    for row in x:
        out.append(row * 2)
    return d2s.stack(out, axis=1)


# ----------------------------------------------------------------- print / assert


@case(POS, NEG, ops=())
def print_tensor(x):
    print("x is", x)
    return x + 1


@case(POS, ops=())
def print_python_value(x):
    n = 3
    print("n =", n, sep=" ")
    return x * n


@case(POS, ops=(), static=False)
def assert_tensor(x):
    assert x.sum() > 0, "x must be positive"
    return x


@case((POS, 2), ops=())
def assert_python(x, k):
    assert k > 0
    return x * k


@case(POS, NEG, ops={"cond"})
def print_in_branch(x):
    if x.sum() > 0:
        print("positive")
        y = x
    else:
        y = -x
    return y


# --------------------------------------------------------------------------- calls


def helper_with_if(v):
    if v.sum() > 0:
        return v * 2
    return v


def helper_plain(v, k=3.0):
    return v * k


@case(POS, NEG, ops={"cond"})
def call_helper_with_if(x):
    return helper_with_if(x) + 1


@case(POS, ops=())
def call_helper_with_default(x):
    return helper_plain(x) + helper_plain(x, k=2.0)


def helper_recursive(v, n):
    if n == 0:
        return v
    return helper_recursive(v + 1, n - 1)


@case((POS, 3), ops=())
def call_recursive_python(x, n):
    return helper_recursive(x, n)


@case(POS, NEG, ops={"cond"})
def call_closure(x):
    bias = 2.0

    def add_bias(v):
        if v.sum() > 0:
            return v + bias
        return v - bias

    return add_bias(x)


@case(POS, NEG, ops={"cond"})
def call_closure_modified_later(x):
    scale = 1.0

    def apply(v):
        return v * scale

    scale = 5.0
    if x.sum() > 0:
        y = apply(x)
    else:
        y = x
    return y


@case(POS, NEG, ops={"cond"})
def call_lambda(x):
    f = lambda v: v * 2 if v.sum() > 0 else v  # noqa: E731
    return f(x)


@case(POS, ops=())
def call_partial(x):
    g = functools.partial(helper_plain, k=4.0)
    return g(x)


class Scaler:
    def __init__(self, k):
        self.k = k

    def apply(self, v):
        if v.sum() > 0:
            return v * self.k
        return v

    def __call__(self, v):
        return self.apply(v) + 1


@case(POS, NEG, ops={"cond"})
def call_method(x):
    return Scaler(3.0).apply(x)


@case(POS, NEG, ops={"cond"})
def call_callable_object(x):
    return Scaler(2.0)(x)


@not_to_static
def python_only_helper(v):
    return v + 1


@case(POS, ops=())
def call_not_to_static(x):
    return python_only_helper(x)


@case(POS, NEG, ops={"cond"})
def call_framework_api(x):
    y = d2s.tanh(x)
    if d2s.sum(y) > 0:
        y = d2s.exp(y)
    return d2s.concat([y, x])


class Gate(d2s.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = d2s.nn.Linear(3, 3)

    def forward(self, v):
        h = self.fc(v)
        if h.sum() > 0:
            h = d2s.nn.functional.relu(h)
        else:
            h = -h
        return h


class Block(d2s.nn.Layer):
    def __init__(self):
        super().__init__()
        self.gate = Gate()
        self.steps = 2

    def forward(self, v):
        for _ in range(self.steps):
            v = self.gate(v)
        return v


d2s.seed(0)
_GATE, _BLOCK = Gate(), Block()


@case(f32(1, 2, 3).reshape(1, 3), f32(-1, -2, -3).reshape(1, 3), ops={"cond"})
def call_sublayer(x):
    return _GATE(x) * 2


@case(f32(1, 2, 3).reshape(1, 3), f32(-1, 0, 1).reshape(1, 3), ops={"cond"})
def call_nested_sublayers(x):
    return _BLOCK(x)


class Counter:
    def __init__(self):
        self.h = None

    def step(self, v):
        self.h = v
        if v.sum() > 0:
            self.h = self.h * 2
        return self.h


@case(POS, NEG, ops={"cond"})
def attribute_state(x):
    c = Counter()
    return c.step(x) + c.h


class Base:
    def transform(self, v):
        return v + 1


class Child(Base):
    def transform(self, v):
        y = super().transform(v)
        if y.sum() > 5:
            y = y * 2
        return y


@case(POS, NEG, ops={"cond"})
def call_method_using_super(x):
    return Child().transform(x)


# ------------------------------------------------------------------- shapes and casts


@case(M2, f32(1, 2, 3, 4).reshape(2, 2), ops=())
def shape_known_branch(x):
    if x.shape[0] > 2:
        return x.sum(axis=0)
    return x.sum(axis=1)


@case(M2, ops={"cond"}, shapes=[[-1, 2]])
def shape_unknown_branch(x):
    if x.shape[0] > 2:
        y = x * 2
    else:
        y = x
    return y


@case(M2, ops=(), shapes=[[-1, 2]])
def shape_unknown_reshape(x):
    batch = x.shape[0]
    return x.sum(axis=0) / batch


@case(M2, f32(1, 2).reshape(1, 2), ops=())
def len_known(x):
    return x * len(x)


@case(M2, ops={"cond"}, shapes=[[-1, 2]])
def len_unknown_in_if(x):
    if len(x) > 1:
        y = x + len(x)
    else:
        y = x
    return y


@case(POS, ops=())
def cast_python_values(x):
    return x * int(2.7) + float(1) + bool(3)


@case(f32(2.5), f32(-1.5), ops=())
def cast_tensor_int(x):
    return int(x.sum()) + 1


@case(POS, ops=())
def cast_tensor_float(x):
    return float(x.mean()) * 2


@case(POS, f32(0, 0, 0), ops={"cond"})
def cast_tensor_bool_in_if(x):
    if bool(x.sum()):
        return x + 1
    return x


@case(M2, ops=())
def shape_unpack_known(x):
    rows, cols = x.shape
    return x.sum() * rows + cols


# --------------------------------------------------------------------------- mixed


@case((M2, i64(2)), (M2 * -1, i64(3)), ops={"while", "cond"})
def rnn_like_loop(x, steps):
    h = x[0] * 0
    for _t in range(steps):
        for row in x:
            h = d2s.tanh(h + row)
        if h.sum() > 0:
            h = h * 0.5
    return h


@case(POS, NEG, MIX, ops={"cond"})
def relu_by_hand(x):
    out = []
    for i in range(3):
        v = x[i]
        if v > 0:
            out.append(v)
        else:
            out.append(v * 0)
    return d2s.stack(out)


@case(f32(3), f32(10), f32(1), ops={"while"})
def collatz_steps(x):
    steps = 0
    v = x
    while v > 1:
        if (v % 2) == 0:
            v = v / 2
        else:
            v = v * 3 + 1
        steps += 1
    return steps


@case((POS, i64(4)), (NEG, i64(4)), ops={"while", "cond"})
def early_exit_search(x, n):
    found = -1
    i = 0
    while i < n:
        if x[i % 3] > 2.5:
            found = i
        i += 1
    return found, i


@case(f32(1, 2), f32(8, 9), ops={"while"})
def newton_sqrt(x):
    guess = x
    diff = x
    while diff.abs().max() > 1e-4:
        new = 0.5 * (guess + x / guess)
        diff = new - guess
        guess = new
    return guess


@case(POS, NEG, ops={"cond"})
def with_statement_in_branch(x):
    if x.sum() > 0:
        with d2s.no_grad():
            y = x * 2
    else:
        y = x
    return y


@case(POS, NEG, ops={"cond"})
def try_around_branch(x):
    try:
        if x.sum() > 0:
            y = x + 1
        else:
            y = x - 1
    except ZeroDivisionError:
        y = x
    return y


@case(POS, NEG, ops={"cond"})
def nested_function_with_control_flow(x):
    def inner(v):
        total = v * 0
        for k in range(2):
            if v.sum() > 0:
                total = total + v * k
            else:
                total = total - v
        return total

    return inner(x) + 1


@case((POS, 2), (NEG, 2), (MIX, 1), ops={"cond"})
def python_loop_tensor_if_python_count(x, n):
    for _ in range(n):
        if x.sum() > 0:
            x = x * 2
        else:
            x = x + 1
    return x


@case(POS, NEG, ops={"cond"})
def augmented_assign_in_branch(x):
    y = x + 0
    if x.sum() > 0:
        y += 3
        y *= 2
    else:
        y -= 1
    return y


@case(POS, NEG, ops={"cond"})
def star_unpack_in_branch(x):
    if x.sum() > 0:
        a, *rest = x * 2, x, x + 1
    else:
        a, *rest = x, x, x
    return a + rest[0] + rest[1]


@case(POS, NEG, ops={"cond"})
def comprehension_in_branch(x):
    if x.sum() > 0:
        parts = [x * k for k in range(3)]
    else:
        parts = [x for _ in range(3)]
    return d2s.stack(parts)


@case(POS, ops=())
def global_read(x):
    return x * SCALE


SCALE = 4.0


@case(POS, NEG, ops={"cond"})
def docstring_and_annotations(x: d2s.Tensor) -> d2s.Tensor:
    """A docstring stays a docstring."""
    y: d2s.Tensor = x
    if x.sum() > 0:
        y = x * 2
    return y


@case((POS, 1), (POS, 2), (POS, 3), ops=())
def match_like_elif_on_python(x, code):
    if code == 1:
        return x
    elif code == 2:
        return x * 2
    else:
        return x * 3


@case(POS, NEG, ops={"cond"})
def kwargs_call(x):
    def combine(a, *, scale=1.0, shift=0.0):
        return a * scale + shift

    if x.sum() > 0:
        y = combine(x, scale=2.0)
    else:
        y = combine(x, shift=1.0)
    return y


@case(POS, NEG, ops={"cond"})
def varargs_call(x):
    def total(*vs):
        s = vs[0] * 0
        for v in vs:
            s = s + v
        return s

    if x.sum() > 0:
        return total(x, x, x)
    return total(x)


@case((POS, i64(3)), ops={"while"})
def while_true_with_break(x, n):
    i = 0
    while True:
        x = x + 1
        i += 1
        if i >= n:
            break
    return x


@case(POS, NEG, MIX, ops={"cond"})
def user_nonlocal_closure(x):
    total = x * 0

    def add(v):
        nonlocal total
        if v.sum() > 0:
            total = total + v

    add(x)
    add(x * 2)
    add(-x)
    return total


@case((M2, i64(2)), (M2, i64(0)), ops={"while"})
def list_pop_in_tensor_loop(x, n):
    stack = [x[0], x[1], x[2]]
    for _ in range(n):
        stack.pop()
    return d2s.stack(stack).sum(axis=0)


@case(M2, M2 * -1, ops={"while", "cond"})
def enumerate_tensor_with_break(x):
    best = -1
    for i, row in enumerate(x):
        if row.sum() > 2:
            best = i
            break
    return best


@case((f32(1), i64(3), i64(2)), (f32(-1), i64(1), i64(4)), ops={"while", "cond"})
def nested_while_with_inner_break(x, n, m):
    i = 0
    acc = x * 0
    while i < n:
        j = 0
        while j < m:
            if acc.sum() > 4:
                break
            acc = acc + x.abs()
            j += 1
        i += 1
    return acc


@case(POS, NEG, ops={"cond"})
def early_return_of_python_value_or_tensor(x):
    if x.sum() > 0:
        return x.sum()
    return 0.0


@case((POS, i64(4)), (NEG, i64(2)), ops={"while", "cond"})
def loop_local_defined_in_branch(x, n):
    acc = x * 0
    for i in range(n):
        if acc.sum() > 3:
            step = x * 0.5
        else:
            step = x
        acc = acc + step
    return acc


CALLS = 0


@case((POS, True), (POS, False), ops=(), static=False)
def global_assigned_in_branch(x, count):
    global CALLS
    if count:
        CALLS = CALLS + 1
    for _ in range(2):
        CALLS += 1
    return x * 0 + 1


@case((POS, i64(3)), (NEG, i64(0)), ops={"while"})
def setitem_in_tensor_loop(x, n):
    y = x * 1
    for _ in range(n):
        y[0] = y[0] + 1
    return y


class Cell:
    def __init__(self):
        self.h = None

    def run(self, v, n):
        self.h = v * 0
        for _ in range(n):
            self.h = self.h + v
        return self.h


@case((POS, i64(3)), (NEG, i64(1)), ops={"while"})
def attribute_carried_by_tensor_loop(x, n):
    return Cell().run(x, n)


@case(M2, M2 * 3, ops={"while"})
def enumerate_target_used_after_loop(x):
    idx = -1
    row = x[0]
    for idx, row in enumerate(x):
        pass
    return idx, row


@case((POS, i64(3)), (NEG, i64(3)), ops={"while", "cond"})
def ifexp_in_while_test(x, n):
    i = 0
    while i < n if x.sum() > 0 else i < 1:
        x = x + 1
        i += 1
    return x


@case((POS, i64(3)), (NEG, i64(2)), ops={"while", "cond"})
def early_return_in_nested_tensor_loops(x, n):
    for i in range(n):
        for j in range(n):
            if (x * (i * j)).sum() > 10:
                return x * i
    return x * 0


@case((POS, i64(3)), (POS, i64(0)), ops={"while"})
def try_in_tensor_loop(x, n):
    s = x * 0
    for _ in range(n):
        try:
            s = s + x
        except ValueError:
            s = s - x
    return s


@case((POS, i64(4)), (NEG, i64(2)), ops={"while", "cond"})
def with_in_tensor_loop(x, n):
    s = x * 0
    for _ in range(n):
        with d2s.no_grad():
            if s.sum() < 5:
                s = s + x
    return s


@case((POS, i64(2)), (POS, i64(0)), ops={"while"})
def while_else_tensor_test(x, n):
    i = 0
    while i < n:
        x = x + 1
        i += 1
    else:
        x = x * 2
    return x


@case(POS, NEG, ops={"cond"})
def walrus_in_if_test(x):
    if (s := x.sum()) > 0:
        y = x + s
    else:
        y = x - s
    return y


@case(POS, NEG, ops={"cond"})
def class_defined_inside(x):
    class Helper:
        def go(self, v):
            if v.sum() > 0:
                return v * 3
            return v

    return Helper().go(x)


@case((POS, i64(3)), (POS, i64(1)), ops={"while"})
def fixed_length_list_carried(x, n):
    pair = [x, x * 2]
    for _ in range(n):
        pair = [pair[1], pair[0] + pair[1]]
    return pair[0]
