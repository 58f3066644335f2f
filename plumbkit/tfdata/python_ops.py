"""The Python behind a pipeline's Python ops (``py_function``, ``numpy_function``,
``from_generator``): which callable each op runs, and whether it visibly draws random numbers.

TensorFlow cannot see inside a Python function, so neither can its graph: whether caching
above one would freeze randomness is read from the function's own code here (names it uses:
``random``, ``np.random``, ``shuffle``...). A function that uses none is taken as
deterministic, and the trace says so.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import time
import types
from typing import Any, Callable, Iterable, Iterator

#: Graph ops that call back into Python by token.
PYTHON_OPS = frozenset({"EagerPyFunc", "PyFunc", "PyFuncStateless"})
#: Names whose use marks a Python function as random (modules, functions, methods).
RANDOM_NAMES = frozenset({
    "random", "rand", "randn", "randint", "random_sample", "randrange", "getrandbits", "shuffle",
    "permutation", "choice", "choices", "uniform", "normal", "gauss", "default_rng", "RandomState",
    "urandom", "binomial", "poisson", "secrets", "uuid4",
})
#: Library code plumbkit follows (closures) but does not read names in.
_LIBRARY_PREFIXES = ("tensorflow", "keras", "numpy", "tf_keras", "builtins")
_MAX_DEPTH = 4


def callable_of(token: str) -> Callable[..., Any] | None:
    """The Python callable registered under a Python op's ``token`` (None if it is gone)."""
    from tensorflow.python.ops import script_ops
    fn = script_ops._py_funcs.get(token)  # noqa: SLF001
    return getattr(fn, "_func", fn)  # tf.py_function registers an EagerFunc wrapping it


@contextlib.contextmanager
def python_call_cpu() -> Iterator[list[float]]:
    """Thread CPU seconds spent inside Python ops' calls while the block runs (``spent[0]``).

    Every ``py_function`` / ``numpy_function`` / ``from_generator`` call enters Python through
    TensorFlow's one registry of Python functions; timed there, with the calling thread's CPU
    clock, it is the time the call holds the GIL (the conversions and the user's code; a sleep
    is not CPU). The registry's class is patched for the block only, and always restored.
    """
    from tensorflow.python.ops import script_ops
    registry = type(script_ops._py_funcs)  # noqa: SLF001
    original = registry.__call__
    spent = [0.0]
    lock = threading.Lock()

    def timed(self, token, device, args):
        start = time.thread_time()
        try:
            return original(self, token, device, args)
        finally:
            used = time.thread_time() - start
            with lock:
                spent[0] += used

    registry.__call__ = timed
    try:
        yield spent
    finally:
        registry.__call__ = original


def user_callables(fn: Any) -> list[Callable[..., Any]]:
    """The user's own functions behind ``fn`` (through TensorFlow's wrappers and closures)."""
    found: list[Callable[..., Any]] = []
    for obj in _walk(fn):
        if isinstance(obj, types.FunctionType) and not _is_library(obj):
            found.append(obj)
    return found


def own_random_names(fn: types.FunctionType) -> list[str]:
    """Random-looking names ``fn``'s own code uses (empty: it looks deterministic)."""
    return sorted(_code_names(fn.__code__) & RANDOM_NAMES)


def random_names(fn: Any) -> list[str]:
    """Random-looking names the user's code behind ``fn`` uses, all callees included."""
    return sorted({n for f in user_callables(fn) for n in own_random_names(f)})


def _is_library(obj: Any) -> bool:
    module = getattr(obj, "__module__", "") or ""
    return module.startswith(_LIBRARY_PREFIXES)


def _walk(root: Any) -> Iterable[Any]:
    """Every object reachable from ``root`` through the links a Python callable has: closures,
    globals its code names, bound ``self``, ``functools.partial``, a generator's state."""
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(root, 0)]
    while stack:
        obj, depth = stack.pop()
        if obj is None or id(obj) in seen or depth > _MAX_DEPTH:
            continue
        seen.add(id(obj))
        yield obj
        for child in _links(obj):
            stack.append((child, depth + 1))


def _links(obj: Any) -> list[Any]:
    if isinstance(obj, types.FunctionType):
        out = [c.cell_contents for c in (obj.__closure__ or ()) if _filled(c)]
        if not _is_library(obj):
            out += [obj.__globals__[n] for n in _code_names(obj.__code__) if n in obj.__globals__]
        return [o for o in out if _callable_like(o)]
    if isinstance(obj, types.MethodType):
        return [obj.__func__, obj.__self__]
    if isinstance(obj, functools.partial):
        return [obj.func, *obj.args, *obj.keywords.values()]
    if hasattr(obj, "_generator") and hasattr(obj, "get_next_id"):  # from_generator's state
        return [obj._generator]  # noqa: SLF001
    call = getattr(type(obj), "__call__", None)
    if callable(obj) and isinstance(call, types.FunctionType):
        return [call]  # a callable object: its __call__
    return []


def _callable_like(obj: Any) -> bool:
    return callable(obj) and not inspect.ismodule(obj) and not isinstance(obj, type) or (
        hasattr(obj, "_generator") and hasattr(obj, "get_next_id"))


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names
