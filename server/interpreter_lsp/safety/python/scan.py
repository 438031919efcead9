"""Risk rules for Python code, read through its syntax tree (`ast`), IPython magics included.

The scan follows names through imports and simple assignments, evaluates path expressions it can
(`os.path.expanduser("~") + "/x"`, `Path.home() / ".ssh"`), and follows where data comes from (the
network, the environment, credential files, decoded blobs) to where it goes (exec, the network, print).
Shell commands inside Python (`subprocess.run("...")`, `os.system`, `!cmd`) go through the shell rules.
"""

from __future__ import annotations

import ast
import posixpath
import shlex
from dataclasses import dataclass, field

from interpreter_lsp.safety.context import UNKNOWN, Context
from interpreter_lsp.safety.places import PathKind, check_delete, check_read, check_write
from interpreter_lsp.safety.python.effects import Effects
from interpreter_lsp.safety.python.indirect import Indirection
from interpreter_lsp.safety.python.ipython import route_ipython
from interpreter_lsp.safety.python.proof import prove_python
from interpreter_lsp.safety.python.tables import (
    CHMOD,
    CHOWN,
    COMMAND_METHODS,
    COMMAND_RUNNERS,
    COPIERS,
    DELETE_SINGLE,
    DELETE_TREE,
    DOTENV,
    ENCODED,
    ENV,
    EXEC_PREFIXES,
    INTERACTIVE_SHELLS,
    MOVERS,
    NET,
    NETWORK_SINK_METHODS,
    NETWORK_SOURCES,
    PRINTERS,
    PROCESSES,
    READ_OPENERS,
    SECRET,
    SENSITIVE_MODULES,
    UNPICKLERS,
)
from interpreter_lsp.safety.python.values import NOTHING, Value, secret_names


def assess_python(code: str, ctx: Context) -> None:
    """Add what `code` (Python, maybe with IPython magics) risks to `ctx.findings`."""
    source = route_ipython(code, ctx)
    if source is None:
        return
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as error:
        line = getattr(error, "lineno", None)
        where = f" (line {line}: {error.msg})" if isinstance(error, SyntaxError) and line else ""
        ctx.add("medium", f"the Python code does not parse{where}, so it cannot be checked")
        return
    except (MemoryError, RecursionError):
        ctx.add("medium", "the Python code is too deeply nested to check")
        return
    scan = _Scan(ctx)
    try:
        scan.visit(tree)
    except RecursionError:
        ctx.add("medium", "the Python code is too deeply nested to check")
    scan.finish()
    prove_python(tree, ctx)  # "low" only for what the allowlist proves harmless


def _unknown_word(value: Value) -> str:
    """A piece of a command known only at run time, as the shell rules should see it: a secret variable,
    the environment (`$(printenv)`: any of its values), or just unknown."""
    secrets = secret_names(value.origins)
    if secrets:
        return f'"${secrets[0]}"'
    return '"$(printenv)"' if ENV in value.origins else "$__unknown"


@dataclass
class _Flags:
    dup2: bool = False
    socket: bool = False
    interactive_shell: bool = False
    downloads: set[str] = field(default_factory=set)


class _Scan(Indirection, Effects, ast.NodeVisitor):
    """Walks the syntax tree: statements bind names, calls are checked against the rules."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.loops = 0
        self.while_loops = 0
        self.flags = _Flags()
        self._called: set[int] = set()  # functions in call position (not "passed as a value")
        self._aliases: set[int] = set()  # `run = os.system`: followed through the name, not passed on

    def visit(self, node: ast.AST) -> None:
        self.ctx.step()  # the time budget
        super().visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.check_reference(node)
            self.check_internals(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load):
            self.check_reference(node)
        self.check_internals(node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.check_internals(node)
        self.generic_visit(node)

    # Statements ----------------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.names[alias.asname] = Value(qualname=alias.name)
            else:
                top = alias.name.split(".")[0]
                self.names[top] = Value(qualname=top)
            self.check_written_module(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            if alias.name == "*":
                continue
            self.names[alias.asname or alias.name] = Value(qualname=f"{module}.{alias.name}".lstrip("."))
        if node.level == 0 and module:
            self.check_written_module(module)

    def visit_Assign(self, node: ast.Assign) -> None:
        if isinstance(node.value, (ast.Name, ast.Attribute)):
            self._aliases.add(id(node.value))
        self.visit(node.value)
        value = self.value(node.value)
        for target in node.targets:
            self._bind(target, value)
            self.check_env_assignment(target, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self._bind(node.target, self.value(node.value))

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            old = self.names.get(node.target.id, NOTHING)
            new = self.value(node.value)
            text = old.text + new.text if old.text is not None and new.text is not None else None
            self.names[node.target.id] = Value(text=text, origins=old.origins | new.origins)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind(node.target, self.value(node.value))

    def _bind(self, target: ast.expr, value: Value) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value
        elif isinstance(target, ast.Attribute) and value.qualname and (dotted := self.qualname(target)):
            self.names[dotted] = value  # `np.mean = os.system`: calls of np.mean are os.system
        elif isinstance(target, (ast.Tuple, ast.List)):
            # `for root, dirs, files in os.walk(top)`: every part names something under top.
            part = value if value.path_like else Value(origins=value.origins)
            for element in target.elts:
                self._bind(element, part)

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._bind(item.optional_vars, self.value(item.context_expr))
        for statement in node.body:
            self.visit(statement)

    visit_AsyncWith = visit_With

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._bind(node.target, self._element_of(node.iter))
        self.loops += 1
        for statement in node.body:
            self.visit(statement)
        self.loops -= 1
        for statement in node.orelse:
            self.visit(statement)

    visit_AsyncFor = visit_For

    def visit_While(self, node: ast.While) -> None:
        self.visit(node.test)
        self.loops += 1
        self.while_loops += 1
        for statement in node.body:
            self.visit(statement)
        self.loops -= 1
        self.while_loops -= 1
        for statement in node.orelse:
            self.visit(statement)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.visit(node.iter)
        self._bind(node.target, self._element_of(node.iter))
        for condition in node.ifs:
            self.visit(condition)

    def _visit_comprehension_node(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        for generator in node.generators:
            self.visit(generator)
        self.loops += 1
        if isinstance(node, ast.DictComp):
            self.visit(node.key)
            self.visit(node.value)
        else:
            self.visit(node.elt)
        self.loops -= 1

    visit_ListComp = _visit_comprehension_node
    visit_SetComp = _visit_comprehension_node
    visit_GeneratorExp = _visit_comprehension_node
    visit_DictComp = _visit_comprehension_node

    # Calls ---------------------------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        self._called.add(id(node.func))
        self.account_for_arguments(node)
        self.generic_visit(node)
        name = self.qualname(node.func)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if method is None and isinstance(node.func, ast.Name):
            method = self.value(node.func).method  # `save = df.to_csv; save(path)`
        receiver = self.value(node.func.value) if isinstance(node.func, ast.Attribute) else NOTHING
        self.check_internal_call(node)
        args = node.args
        self.check_callables_passed(name, method, node)
        if name is not None:
            self._check_named_call(name, node)
            self.check_ipython(name, node)
            self.check_lookup(name, node)
        if method is not None and (name is None or not name.startswith(("os.", "shutil.", "subprocess."))):
            self._check_method(method, receiver, node)
        self.check_effects(name, method, node)
        if (name or "").startswith("?") or (receiver.qualname or "").startswith("?"):
            # A function looked up by a computed name: its string arguments may well be commands.
            for arg in args:
                text = self.value(arg).text
                if text is not None:
                    self.ctx.nested("shell", text)

    def _check_named_call(self, name: str, node: ast.Call) -> None:
        ctx = self.ctx
        args = node.args
        first = self.value(args[0]) if args else NOTHING
        if name in COMMAND_RUNNERS or name.startswith(EXEC_PREFIXES):
            self._check_command(name, node)
        elif name in DELETE_TREE:
            self._delete(first, recursive=True, node=args[0] if args else None)
        elif name in DELETE_SINGLE:
            self._delete(first, recursive=self.loops > 0, node=args[0] if args else None)
        elif name in MOVERS and len(args) >= 2:
            self._delete(first, recursive=name == "shutil.move", action="moves")
            check_write(self._target(self.value(args[1])), ctx, verb="moves files")
        elif name in COPIERS and len(args) >= 2:
            check_read(self._target(first), ctx, shows=False)
            check_write(self._target(self.value(args[1])), ctx, verb="copies files")
        elif name in CHMOD and args:
            self._chmod(first, args[1] if len(args) > 1 else None)
        elif name in CHOWN and args:
            where = self._target(first)
            if where.kind is not PathKind.WORKSPACE:
                ctx.add("high" if where.kind is not PathKind.TEMP else "medium", f"changes the owner of {where.shown}")
            else:
                ctx.add("medium", f"changes the owner of {where.shown}")
        elif name in ("open", "io.open", "codecs.open", "os.open", "builtins.open"):
            self._open(first, self._mode(node, 1))
        elif name in READ_OPENERS:
            path = first if args else Value(text=".env") if name == "dotenv.dotenv_values" else NOTHING
            if path.text is not None:
                check_read(self._target(path), ctx, shows=False)
        elif name in ("exec", "eval", "compile", "builtins.exec", "builtins.eval", "execfile", "runpy.run_path"):
            self._check_exec(name.rsplit(".", 1)[-1], node)
        elif name in UNPICKLERS and args:
            if NET in first.origins or "://" in (first.text or ""):
                ctx.add("high", f"loads pickled data from the network, which can run any code ({name})")
            elif ENCODED in first.origins:
                ctx.add("high", f"loads pickled data hidden in the code, which can run any code ({name})")
        elif name in ("__import__", "importlib.import_module", "builtins.__import__") and args:
            if first.text is None:
                ctx.add("medium", "imports a module whose name is computed at run time")
            else:
                self.check_written_module(first.text)
        elif name == "runpy.run_module" and args:
            if first.text is None:
                ctx.add("medium", "runs a module whose name is computed at run time (runpy)")
            else:
                self.check_written_module(first.text)
        elif name == "shutil.unpack_archive" and args:
            self.check_extract(node, 1)
        elif name == "getattr" and len(args) >= 2:
            module = self.qualname(args[0])
            if module in SENSITIVE_MODULES and self.value(args[1]).text is None:
                ctx.add("medium", f"looks up a function of {module} by a name computed at run time (getattr)")
        elif name in ("os.kill", "os.killpg") and args:
            self._kill(name, args)
        elif name in ("os.fork", "os.forkpty", "multiprocessing.Process"):
            if self.while_loops:
                ctx.add("high", "starts processes without end until the machine stops (fork bomb)")
        elif name == "os.dup2":
            self.flags.dup2 = True
        elif name.startswith("socket.") or name == "socket":
            self.flags.socket = True
        elif name == "os.chdir" and args:
            self._chdir(first)
        elif name in ("urllib.request.urlretrieve", "wget.download") and len(args) >= 2:
            target = self.value(args[1])
            if target.text is not None:
                self.ctx.downloaded.add(self._normalised(target.text))
                check_write(self._target(target), ctx)
        elif name in PRINTERS:
            for arg in args:
                self._check_shown(self.value(arg))
        elif name in ("os.setuid", "os.setgid", "os.setreuid", "ctypes.CDLL", "ctypes.cdll.LoadLibrary"):
            ctx.add("medium", f"changes process privileges or loads native code ({name})")
        if name.startswith(NETWORK_SOURCES) or name in ("urllib.request.Request",):
            self._check_sent(node)
            self.check_secrets_sent(node)
            if name.startswith("socket."):
                self.flags.socket = True

    def _check_method(self, method: str, receiver: Value, node: ast.Call) -> None:
        ctx = self.ctx
        args = node.args
        if method in COMMAND_METHODS and args:
            self._check_command(f".{method}", node)
        if receiver.path_like or receiver.qualname in ("pathlib.Path", "Path"):
            where = self._target(receiver)
            if method in ("unlink", "rmdir"):
                self._delete(receiver, recursive=self.loops > 0)
            elif method in ("write_text", "write_bytes", "touch", "symlink_to", "hardlink_to"):
                check_write(where, ctx)
                if receiver.text is not None:
                    ctx.wrote(receiver.text, self.value(args[0]).text if args and method == "write_text" else None)
            elif method in ("read_text", "read_bytes"):
                check_read(where, ctx, shows=False)
            elif method == "open":
                self._open(receiver, self._mode(node, 0))
            elif method in ("rename", "replace") and args:
                self._delete(receiver, recursive=True, action="moves")
                check_write(self._target(self.value(args[0])), ctx, verb="moves files")
            elif method in ("chmod", "lchmod") and args:
                self._chmod(receiver, args[0])
            elif method == "rmtree":
                self._delete(receiver, recursive=True)
        if method == "extractall":
            self.check_extract(node, 0)
        elif method == "extract" and len(args) >= 2:
            self.check_extract(node, 1)
        if method in ("kill", "terminate", "send_signal") and PROCESSES in receiver.origins:
            ctx.add("high", "kills every process it can find (psutil.process_iter)")
        if method in NETWORK_SINK_METHODS and method not in ("get", "write", "connect"):
            self._check_sent(node)
            self.check_secrets_sent(node)
        if method == "write" and receiver.qualname is None and self.flags.socket:
            self._check_sent(node)
        if method == "connect":
            self.flags.socket = self.flags.socket or "socket" in (receiver.qualname or "")

    def _check_command(self, name: str, node: ast.Call) -> None:
        ctx = self.ctx
        args = node.args
        if not args and not node.keywords:
            return
        command = args[0] if args else next((k.value for k in node.keywords if k.arg in ("args", "cmd")), None)
        if command is None:
            return
        if name.startswith(EXEC_PREFIXES) and len(args) >= 2:
            command = args[1] if name.startswith(("os.execv", "os.execl")) else args[-1]
            if name.startswith(("os.execl", "os.spawnl")):
                command = ast.List(elts=list(args[1:]), ctx=ast.Load())
        if name.startswith(("asyncio.create_subprocess_exec", "os.execl", "os.spawnl")) and len(args) > 1:
            command = ast.List(elts=list(args), ctx=ast.Load())
        value = self.value(command)
        text = self._command_text(command, value)
        if NET in value.origins:
            ctx.add("high", "downloads code and runs it straight away (as a command)")
        if ENCODED in value.origins:
            ctx.add("high", "runs a hidden (encoded) command")
        if text is None:
            ctx.add("medium", f"runs a command built at run time ({name.lstrip('.')})")
            return
        words = text.split()
        if words and words[0] in INTERACTIVE_SHELLS and (len(words) == 1 or words[1] == "-i"):
            self.flags.interactive_shell = True
        if name == "pty.spawn":
            self.flags.interactive_shell = True
        ctx.nested("shell", text)

    def _command_text(self, node: ast.expr, value: Value) -> str | None:
        """The shell command a value spells; pieces known only at run time become `$__unknown`, or the
        secret variable they came from (`$OPENAI_API_KEY`), so that the shell rules see where it goes."""
        if value.text is not None:
            return value.text.replace(UNKNOWN, _unknown_word(value))
        if isinstance(node, (ast.List, ast.Tuple)):
            parts = []
            for element in node.elts:
                if isinstance(element, ast.Starred):
                    parts.append("$__unknown")
                    continue
                part = self.value(element)
                text = part.text
                if text is None and self.qualname(element) == "sys.executable":
                    text = "python"
                if text is None:
                    parts.append(_unknown_word(part))
                elif UNKNOWN in text:
                    parts.append(shlex.quote(text.replace(UNKNOWN, "\0")).replace("\0", f"'{_unknown_word(part)}'"))
                else:
                    parts.append(shlex.quote(text))
            return " ".join(parts)
        return None

    def _check_exec(self, name: str, node: ast.Call) -> None:
        ctx = self.ctx
        if not node.args:
            return
        code = node.args[0]
        value = self.value(code)
        if name == "run_path":
            if value.text is not None and ctx.runs_written_here(value.text, "python"):
                return
            if value.text is not None and self._normalised(value.text) in ctx.downloaded:
                ctx.add("high", f"runs a script it just downloaded: {value.text}")
            elif value.text is None or UNKNOWN in value.text:
                ctx.add("medium", "runs a script whose path is only known at run time (runpy)")
            else:
                self.check_written_script(value)
            return
        if NET in value.origins:
            ctx.add("high", f"downloads code and runs it straight away ({name})")
        elif ENCODED in value.origins:
            ctx.add("high", f"runs hidden (encoded) code ({name})")
        elif value.text is not None and UNKNOWN not in value.text and not value.origins:
            ctx.nested("python", value.text)
        else:
            ctx.add("medium", f"runs code built at run time ({name}), which cannot be checked")

    def _check_sent(self, node: ast.Call) -> None:
        origins: set[str] = set()
        for arg in node.args:
            origins |= self.value(arg).origins
        for keyword in node.keywords:
            if keyword.arg not in ("url", "method"):
                origins |= self.value(keyword.value).origins
        if ENV in origins:
            self.ctx.add("high", "sends your environment variables (they may hold keys) over the network")
        if SECRET in origins:
            self.ctx.add("high", "sends credentials over the network")
        if DOTENV in origins:
            self.ctx.add("high", "sends secrets from .env over the network")

    def _check_shown(self, value: Value) -> None:
        if DOTENV in value.origins:
            self.ctx.add("high", "shows secrets from .env (they would reach the model)")
        if SECRET in value.origins:
            self.ctx.add("high", "shows credentials (they would reach the model)")
        for name in secret_names(value.origins):
            self.ctx.add("medium", f"shows a secret (${name}); it would reach the model")

    def _delete(
        self, path: Value, *, recursive: bool, action: str = "deletes", node: ast.expr | None = None
    ) -> None:
        check_delete(self._target(path, node), self.ctx, recursive=recursive, action=action,
                     unknown_matters=action == "deletes")

    def _open(self, path: Value, mode: str | None) -> None:
        where = self._target(path)
        if mode is None or not any(c in mode for c in "wax+"):
            check_read(where, self.ctx, shows=False)
        else:
            check_write(where, self.ctx)
            if path.text is not None:
                self.ctx.wrote(path.text)

    def _mode(self, node: ast.Call, position: int) -> str | None:
        mode_node: ast.expr | None = node.args[position] if len(node.args) > position else None
        for keyword in node.keywords:
            if keyword.arg == "mode":
                mode_node = keyword.value
        if mode_node is None:
            return None
        return self.value(mode_node).text or "?"

    def _chmod(self, path: Value, mode: ast.expr | None) -> None:
        where = self._target(path)
        bits = mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, int) else None
        wide_open = bits is not None and bool(bits & 0o002)
        setuid = bits is not None and bool(bits & 0o6000)
        if where.kind in (PathKind.SYSTEM, PathKind.CREDENTIAL, PathKind.STARTUP, PathKind.ROOT, PathKind.HOME,
                          PathKind.DEVICE, PathKind.HISTORY):
            self.ctx.add("high", f"changes permissions of {where.shown}")
        elif setuid:
            self.ctx.add("high", f"makes a program run with its owner's rights (setuid): {where.shown}")
        elif wide_open:
            self.ctx.add("medium" if self.loops == 0 else "high",
                         f"makes files writable by everyone: {where.shown}")
        elif where.kind is PathKind.OUTSIDE:
            self.ctx.add("medium", f"changes permissions outside the workspace: {where.shown}")

    def _kill(self, name: str, args: list[ast.expr]) -> None:
        pid = args[0]
        value = pid.value if isinstance(pid, ast.Constant) else None
        if isinstance(pid, ast.UnaryOp) and isinstance(pid.op, ast.USub) and isinstance(pid.operand, ast.Constant):
            value = -pid.operand.value if isinstance(pid.operand.value, int) else None
        if value in (-1, 0, 1) or (name == "os.killpg" and value in (0, 1)):
            self.ctx.add("high", "kills every process it can reach (kill -1) or a whole process group")
        elif self.loops:
            self.ctx.add("high", "kills processes in a loop")
        else:
            self.ctx.add("medium", "stops a process (os.kill)")

    def _chdir(self, path: Value) -> None:
        if path.text is None or UNKNOWN in path.text:
            self.ctx.cwd = UNKNOWN
            return
        text = path.text
        if text.startswith("~"):
            text = self.ctx.home + text[1:]
        base = self.ctx.cwd or self.ctx.workspace or ""
        if base or text.startswith("/"):
            self.ctx.cwd = posixpath.normpath(posixpath.join(base, text))

    def finish(self) -> None:
        if self.flags.dup2 and self.flags.interactive_shell:
            self.ctx.add("high", "connects a shell to another machine (reverse shell)")

