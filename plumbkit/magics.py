"""``%%plumb`` and ``%plumb``: run a cell as usual, find its pipeline, trace it live.

Thin by design: it runs the user's cell in the user's namespace, picks the pipeline, and hands
it to the widgets or the API. Bad input gets one clear line, never a plumbkit traceback.
"""

from __future__ import annotations

import ast
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from .model import units
from .model.protocol import PROTOCOL_HELP, PROTOCOLS

class PlumbUsageError(ValueError):
    pass


def parse_bytes(text: str | None, what: str = "memory budget") -> float | None:
    """``"2GB"``, ``"500MB"``, ``"1e9"`` -> bytes."""
    try:
        return units.parse_bytes(text, what)
    except ValueError as err:
        raise PlumbUsageError(str(err)) from None


def _is_dataset(value: Any) -> bool:
    import tensorflow as tf
    return isinstance(value, tf.data.Dataset)


def _assigned_names(cell: str) -> list[str]:
    try:
        tree = ast.parse(cell)
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
    return names


def _zero_arg_factory(value: Any) -> bool:
    import inspect
    if not callable(value) or isinstance(value, type):
        return False
    try:
        sig = inspect.signature(value)
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in sig.parameters.values())


def find_pipeline(cell: str, namespace: dict, last_value: Any, var: str | None) -> tuple[Any, str]:
    """(pipeline, how it was found); raises PlumbUsageError with a one-line explanation.

    Looks, in order, at ``--var``, the cell's last expression, the datasets the cell assigned,
    and the zero-argument functions it defines whose code visibly returns a tf.data chain
    (read with ``ast``: no function is called to find out, see :mod:`plumbkit.export.cell`).
    """
    from .export.cell import dataset_factories
    if var:
        if var not in namespace:
            raise PlumbUsageError(f"no variable {var!r} in the namespace")
        value = namespace[var]
        if _is_dataset(value) or _zero_arg_factory(value):
            return value, f"variable {var}"
        raise PlumbUsageError(f"{var!r} is a {type(value).__name__}, not a tf.data.Dataset "
                              f"or a zero-argument function returning one")
    if _is_dataset(last_value):
        return last_value, "the cell's last expression"
    candidates = [n for n in _assigned_names(cell) if n in namespace and _is_dataset(namespace[n])]
    if candidates:
        return namespace[candidates[-1]], f"variable {candidates[-1]}" + (
            f" (the last of {candidates})" if len(set(candidates)) > 1 else "")
    factories = [n for n in dataset_factories(cell) if n in namespace and callable(namespace[n])]
    if factories:
        return namespace[factories[-1]], f"function {factories[-1]}()"
    raise PlumbUsageError("no tf.data pipeline in this cell: end it with the dataset, assign one, "
                          "define a function that returns one, or name it with --var")


def has_widget_frontend(shell: Any) -> bool:
    """False in a terminal IPython (no front end renders widgets); True in a kernel and in a plain
    InteractiveShell (tests, embedding), where displays go to the display publisher."""
    return not any(cls.__name__ == "TerminalInteractiveShell" for cls in type(shell).__mro__)


@magics_class
class PlumbMagics(Magics):
    """Keeps the last widget, plan and cell so ``%plumb export`` and ``%plumb stop`` can use them."""

    last_widget: Any = None
    last_plan: Any = None
    last_cell: str | None = None
    last_trace: Any = None
    last_export: str | None = None

    @magic_arguments()
    @argument("target", nargs="?", default=None,
              help="line magic only: a dataset variable to trace, or 'export' / 'stop' / 'cancel'")
    @argument("-s", "--seconds", type=float, default=10.0, help="longest trace, seconds (default 10)")
    @argument("--batches", type=int, default=None, help="stop after this many minibatches")
    @argument("--var", default=None, help="variable holding the pipeline (when it is not the last expression)")
    @argument("--cores", type=int, default=None, help="cores to plan for (default: this machine's)")
    @argument("--memory-budget", default=None, help="cache budget, e.g. 2GB (default: half of free memory)")
    @argument("--disk-budget", default=None,
              help="disk tier budget, e.g. 2GB: a cache memory cannot hold may go to --cache-dir "
                   "(default: off; the plan offers it with the space it needs)")
    @argument("--cache-dir", default=None, help="the disk tier's folder (default: ~/.cache/plumbkit)")
    @argument("--optimize", action="store_true",
              help="trace, then run the full optimization in this cell (progress; interrupt to cancel)")
    @argument("--step", action="store_true", help="trace, then take one bottleneck step in this cell")
    @argument("--model", default=None, metavar="NAME",
              help="a compiled Keras model (its variable): its training step runs in the loop; the header "
                   "says input-bound or model-bound, the plan gives training steps/s")
    @argument("--train-step", default=None, metavar="NAME",
              help="your train step instead of a Keras model (the variable of a callable taking one "
                   "minibatch, e.g. a tf.function), run in the loop")
    @argument("--export", action="store_true", help="with --optimize: propose the optimized cell below")
    @argument("--protocol", choices=tuple(PROTOCOLS), default="quick", help=PROTOCOL_HELP)
    @argument("--no-widget", action="store_true", help="plain text instead of the widget (as in a terminal)")
    @argument("--verbose", action="store_true",
              help="let TensorFlow, absl and the solver print their logs while plumbkit runs")
    @line_cell_magic
    def plumb(self, line: str = "", cell: str | None = None):
        """Trace a tf.data pipeline and show its operators, rates and bottleneck live.

        As a cell magic the cell runs exactly as without it; then plumbkit finds the pipeline
        (the last expression, --var, or the dataset / zero-argument function the cell assigned).
        One widget for every path: plain ``%%plumb`` traces in the background (the cell returns,
        the buttons answer); ``--optimize`` and ``--step`` trace and then optimize or step in the
        cell itself. One plumbkit measurement runs at a time: Optimize or Step stops a live trace
        first. Interrupt the kernel (or click Cancel) to stop; what was measured is kept.
        """
        try:
            args = parse_argstring(self.plumb, line)
            budget = parse_bytes(args.memory_budget)
            args.disk_budget = parse_bytes(args.disk_budget, "disk budget")
        except (PlumbUsageError, Exception) as err:  # noqa: BLE001 - a usage problem, one line
            print(f"plumbkit: {err}")
            return None
        if cell is None:
            return self._line(args, budget)
        result = self.shell.run_cell(cell, store_history=False)
        if result.error_before_exec is not None or result.error_in_exec is not None:
            print("plumbkit: the cell raised (see above); nothing was traced")
            return None
        try:
            pipeline, how = find_pipeline(cell, self.shell.user_ns, result.result, args.var)
        except PlumbUsageError as err:
            print(f"plumbkit: {err}")
            return None
        self.last_cell = cell
        return self._run(pipeline, args, budget, cell)

    def _line(self, args, budget):
        if args.target == "stop":
            if self.last_widget is not None:
                self.last_widget.live.stop()
            return None
        if args.target == "cancel":
            from .engine.scheduler import SCHEDULER
            op = SCHEDULER.cancel_active()
            print(f"plumbkit: cancelled {op.describe()}" if op else "plumbkit: nothing is running")
            return None
        if args.target == "export":
            return self._export()
        if not args.target:
            print("plumbkit: %plumb needs a dataset variable, 'export', 'stop' or 'cancel' (see %plumb?)")
            return None
        args.var = args.target
        try:
            pipeline, _ = find_pipeline("", self.shell.user_ns, None, args.var)
        except PlumbUsageError as err:
            print(f"plumbkit: {err}")
            return None
        return self._run(pipeline, args, budget, None)

    def _run(self, pipeline, args, budget, cell):
        from .host.quiet import quiet
        from .model.errors import PipelineError
        try:
            args.in_the_loop = self._in_the_loop(args)
        except PlumbUsageError as err:
            print(f"plumbkit: {err}")
            return None
        try:
            with quiet(args.verbose):
                if args.no_widget or not has_widget_frontend(self.shell):
                    return self._text(pipeline, args, budget)
                return self._widget(pipeline, args, budget, cell)
        except PipelineError as err:
            print(f"plumbkit: {err}")
        except KeyboardInterrupt:  # between two measurements: nothing was changed
            print("plumbkit: interrupted; nothing was changed")
        return None

    def _in_the_loop(self, args) -> dict[str, Any]:
        """``--model NAME`` / ``--train-step NAME``: the objects they name, as trace() and
        optimize() take them (``model=``, ``step=``)."""
        found = {}
        for option, name, key in (("--model", args.model, "model"), ("--train-step", args.train_step, "step")):
            if name is None:
                continue
            if name not in self.shell.user_ns:
                raise PlumbUsageError(f"{option}: no variable {name!r} in the namespace")
            found[key] = self.shell.user_ns[name]
        return found

    def _widget(self, pipeline, args, budget, cell):
        """Display the one widget; with --optimize / --step run them here, in the cell."""
        from .widgets import PlumbWidget
        one_shot = args.optimize or args.step
        widget = PlumbWidget(pipeline, seconds=args.seconds, cores=args.cores, max_batches=args.batches,
                             memory_budget=budget, disk_budget=args.disk_budget, cache_dir=args.cache_dir,
                             cell_source=cell, namespace=self.shell.user_ns,
                             live=not one_shot, verbose=args.verbose, protocol=args.protocol,
                             in_the_loop=args.in_the_loop)
        self.last_widget = widget
        self.shell.user_ns["plumb_widget"] = widget
        widget.display_handle = display(widget, display_id=True)
        if not one_shot:
            return None
        if args.step:
            s = widget.run_step()
            self.last_trace = widget.trace
            if s is not None and s.after is not None:
                self.shell.user_ns["plumbed_ds"] = s.dataset
        if args.optimize:
            plan = widget.run_optimize()
            self.last_trace = widget.trace
            if plan is not None and not plan.partial:
                self.last_plan = plan
                self.shell.user_ns["plumbed_ds"] = plan.dataset
                if args.export:
                    code = self._export()
                    if code:
                        widget.optimize.show_code(code)
                        widget.optimize.message.value += "; the optimized cell is proposed below"
        widget.refresh_display()
        return None

    def _text(self, pipeline, args, budget):
        """The terminal's view: the trace and the plan as text, progress as a bar or as lines."""
        import sys

        from .engine import optimize, step, trace as trace_pipeline
        from .render.progress import ProgressPrinter
        trace = trace_pipeline(pipeline, seconds=args.seconds, cores=args.cores, max_batches=args.batches,
                               **args.in_the_loop)
        self.last_trace = trace
        print(trace)
        if trace.partial:
            print(f"plumbkit: {trace.ended}; the trace above is what was measured so far")
            return None
        if args.step:
            s = step(pipeline, seconds=max(1.0, args.seconds / 3), cores=args.cores)
            if s.partial:
                print(f"plumbkit: step {'interrupted' if s.before is None or s.before.partial else 'cut short'}; "
                      f"nothing was changed")
            else:
                self.shell.user_ns["plumbed_ds"] = s.dataset
                print(f"\nbottleneck step: {s.operator} -> parallelism {s.parallelism}: "
                      f"{s.before.throughput:.1f} -> {s.throughput:.1f} minibatches/s (measured); "
                      f"new pipeline in `plumbed_ds`")
        if args.optimize:
            progress = ProgressPrinter(sys.stdout, prefix="plumbkit: ")
            plan = optimize(pipeline, cores=args.cores, memory_budget=budget, disk_budget=args.disk_budget,
                            cache_dir=args.cache_dir,
                            seconds=max(2.0, min(args.seconds, 6.0)), on_progress=progress,
                            protocol=PROTOCOLS[args.protocol], **args.in_the_loop)
            progress.close()
            print(plan)
            if plan.partial:
                return None
            self.last_plan = plan
            self.shell.user_ns["plumbed_ds"] = plan.dataset
            if args.export:
                self._export()
        return None

    def _export(self) -> str | None:
        from .export.source import CodegenError
        plan = self.last_plan
        if plan is None and self.last_widget is not None:
            plan = self.last_widget.optimize.plan
        if plan is None or self.last_cell is None:
            print("plumbkit: nothing to export yet: run %%plumb --optimize (or the Optimize button) first")
            return None
        if plan.partial:
            print("plumbkit: the last optimization was cut short: nothing to export")
            return None
        try:
            code = plan.rewrite_source(self.last_cell)
        except CodegenError as err:
            print(f"plumbkit: {err}")
            return None
        self.shell.set_next_input(code, replace=False)
        self.last_export = code
        return code


def register(ipython) -> None:
    ipython.register_magics(PlumbMagics)
