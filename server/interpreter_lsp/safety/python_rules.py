"""Risk rules for Python code, read through its syntax tree (`ast`), IPython magics included.

The scan follows names through imports and simple assignments, evaluates path expressions it can
(`os.path.expanduser("~") + "/x"`, `Path.home() / ".ssh"`), and follows where data comes from (the
network, the environment, credential files, decoded blobs) to where it goes (exec, the network, print).
Shell commands inside Python (`subprocess.run("...")`, `os.system`, `!cmd`) go through the shell rules.
"""

from __future__ import annotations

import ast
import posixpath
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field

from interpreter_lsp.safety.rules import (
    MAX_DEPTH,
    UNKNOWN,
    Context,
    PathKind,
    Target,
    check_delete,
    check_read,
    check_write,
    classify_path,
)

# Where data comes from.
NET = "network"
ENCODED = "encoded"
ENV = "environment"
SECRET = "secret"  # read from a credential file
DOTENV = "dotenv"
PROCESSES = "processes"  # psutil.process_iter()

_COMMAND_RUNNERS = frozenset(
    {"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
     "subprocess.Popen", "subprocess.getoutput", "subprocess.getstatusoutput", "os.system", "os.popen",
     "asyncio.create_subprocess_shell", "asyncio.create_subprocess_exec", "pty.spawn", "commands.getoutput",
     "os.posix_spawn", "os.posix_spawnp", "sh.Command", "invoke.run", "fabric.Connection.run"}
)
_EXEC_PREFIXES = ("os.exec", "os.spawn")
# Method names that run a shell command whatever object they are called on (get_ipython().system ...).
_COMMAND_METHODS = frozenset({"system", "popen", "getoutput", "getstatusoutput"})
_NETWORK_SOURCES = ("requests.", "httpx.", "urllib.request.urlopen", "urllib2.urlopen", "urllib.urlopen",
                    "aiohttp.", "http.client.", "urllib3.", "pycurl.", "wget.download", "socket.")
_NETWORK_SINK_METHODS = frozenset({"post", "put", "patch", "request", "send", "sendall", "sendto", "sendmail",
                                   "send_message", "upload_file", "upload_fileobj", "urlopen", "storbinary",
                                   "get", "stream", "connect", "write"})
_DECODERS = frozenset(
    {"base64.b64decode", "base64.decodebytes", "base64.b32decode", "base64.b16decode", "base64.a85decode",
     "base64.b85decode", "base64.urlsafe_b64decode", "base64.standard_b64decode", "codecs.decode",
     "zlib.decompress", "bz2.decompress", "lzma.decompress", "gzip.decompress", "binascii.unhexlify",
     "binascii.a2b_base64", "binascii.a2b_hex", "bytes.fromhex", "marshal.loads", "bytearray.fromhex"}
)
_UNPICKLERS = frozenset({"pickle.loads", "pickle.load", "dill.loads", "dill.load", "cloudpickle.loads",
                         "marshal.loads", "joblib.load", "torch.load", "shelve.open", "yaml.unsafe_load"})
_DELETE_SINGLE = frozenset({"os.remove", "os.unlink", "os.rmdir"})
_DELETE_TREE = frozenset({"shutil.rmtree", "os.removedirs", "send2trash.send2trash"})
_COPIERS = frozenset({"shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "shutil.copyfileobj",
                      "os.link", "os.symlink"})
_MOVERS = frozenset({"shutil.move", "os.rename", "os.replace", "os.renames"})
_CHMOD = frozenset({"os.chmod", "os.lchmod", "os.fchmod"})
_CHOWN = frozenset({"os.chown", "os.lchown", "shutil.chown", "os.fchown"})
_READ_OPENERS = frozenset({"sqlite3.connect", "configparser.ConfigParser.read", "dotenv.dotenv_values",
                           "json.load", "tomllib.load", "yaml.safe_load", "netrc.netrc", "io.open",
                           "codecs.open"})
_PRINTERS = frozenset({"print", "pprint.pprint", "pprint.pp", "display", "IPython.display.display",
                       "sys.stdout.write", "sys.stderr.write", "logging.info", "logging.warning"})
_INTERACTIVE_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "/bin/sh", "/bin/bash", "/bin/zsh",
                                 "/usr/bin/sh", "/usr/bin/bash", "cmd.exe", "powershell"})
# Cell magics whose body is shell, and ones whose body is still Python.
_SHELL_CELL_MAGICS = frozenset({"bash", "sh", "script", "system", "!"})
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "python", "python3", "debug", "ipython",
                                 "py", "pypy"})
_HARMLESS_CELL_MAGICS = frozenset({"html", "markdown", "latex", "svg", "md"})


@dataclass(frozen=True)
class Value:
    """What the scan knows about an expression's value."""

    text: str | None = None  # a string or path; pieces only known at run time are UNKNOWN
    origins: frozenset[str] = frozenset()  # NET, ENV, SECRET ...
    qualname: str | None = None  # a module or function it names ("os.path.join")
    path_like: bool = False


_NOTHING = Value()


def assess_python(code: str, ctx: Context) -> None:
    """Add what `code` (Python, maybe with IPython magics) risks to `ctx.findings`."""
    if ctx.depth > MAX_DEPTH:
        ctx.add("medium", "code nested too deep to check (code that writes code that runs code)")
        return
    source = _route_ipython(code, ctx)
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


# --- IPython: magics and shell escapes ------------------------------------------------------------------

_ASSIGNED_ESCAPE = re.compile(r"^(\s*)([\w.,\s\[\]]+?)\s*=\s*(!|%sx\b|%system\b)(.*)$")


def _route_ipython(code: str, ctx: Context) -> str | None:
    """Check magics and `!` escapes and return the plain Python left (None: nothing left to parse)."""
    try:
        ast.parse(code)
        return code  # plain Python: nothing to route, and `!=` stays an operator
    except (SyntaxError, ValueError):
        pass
    except (MemoryError, RecursionError):
        return code
    lines = code.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        head = lines[first].strip()[2:].split()
        magic = head[0] if head else ""
        body = "\n".join(lines[first + 1:])
        if magic in _SHELL_CELL_MAGICS:
            if magic == "script" and len(head) > 1 and not any(s in head[1] for s in ("sh", "bash", "zsh")):
                ctx.add("medium", f"cannot assess {head[1]} code: read it before it runs")
                return None
            _shell(body, ctx)
            return None
        if magic in ("writefile", "file"):
            target = next((a for a in head[1:] if not a.startswith("-")), None)
            if target:
                check_write(classify_path(target, ctx), ctx)
            return None
        if magic in _HARMLESS_CELL_MAGICS:
            return None
        if magic not in _PYTHON_CELL_MAGICS:
            ctx.add("medium", f"cannot assess a %%{magic} cell: read it before it runs")
            return None
        lines = lines[first + 1:]
    out: list[str] = []
    for line in lines:
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        assigned = _ASSIGNED_ESCAPE.match(line)
        if stripped.startswith("!"):
            _shell(stripped.lstrip("!"), ctx)
            out.append(indent + "pass")
        elif stripped.startswith("%") and not stripped.startswith("%%"):
            _line_magic(stripped[1:], ctx)
            out.append(indent + "pass")
        elif assigned:
            _shell(assigned.group(4), ctx)
            out.append(f"{assigned.group(1)}{assigned.group(2)} = None")
        elif (stripped.endswith("?") and not stripped.startswith("#")) or stripped.startswith("?"):
            out.append(indent + "pass")
        else:
            out.append(line)
    return "\n".join(out)


def _line_magic(text: str, ctx: Context) -> None:
    name, _, rest = text.partition(" ")
    if name in ("pip", "conda", "mamba", "uv", "micromamba", "npm"):
        _shell(f"{name} {rest}", ctx)
    elif name in ("system", "sx", "sc"):
        _shell(rest, ctx)
    elif name == "cd":
        _shell(f"cd {rest}", ctx)
    elif name in ("writefile", "save"):
        target = next((a for a in rest.split() if not a.startswith("-")), None)
        if target:
            check_write(classify_path(target, ctx), ctx)
    elif name == "load" and "://" in rest:
        ctx.add("medium", f"loads code from the network into the cell: {rest.strip()[:60]}")
    elif name == "run" and "://" in rest:
        ctx.add("high", f"downloads code and runs it straight away (%run {rest.strip()[:60]})")


def _shell(code: str, ctx: Context) -> None:
    from interpreter_lsp.safety.shell_rules import assess_shell

    ctx.depth += 1
    try:
        assess_shell(code, ctx)
    finally:
        ctx.depth -= 1


# --- The scan -------------------------------------------------------------------------------------------


@dataclass
class _Flags:
    dup2: bool = False
    socket: bool = False
    interactive_shell: bool = False
    downloads: set[str] = field(default_factory=set)


class _Scan(ast.NodeVisitor):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.names: dict[str, Value] = {}
        self.loops = 0
        self.while_loops = 0
        self.flags = _Flags()

    # Statements ----------------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.names[alias.asname] = Value(qualname=alias.name)
            else:
                top = alias.name.split(".")[0]
                self.names[top] = Value(qualname=top)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            if alias.name == "*":
                continue
            self.names[alias.asname or alias.name] = Value(qualname=f"{module}.{alias.name}".lstrip("."))

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        value = self.value(node.value)
        for target in node.targets:
            self._bind(target, value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self._bind(node.target, self.value(node.value))

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            old = self.names.get(node.target.id, _NOTHING)
            new = self.value(node.value)
            text = old.text + new.text if old.text is not None and new.text is not None else None
            self.names[node.target.id] = Value(text=text, origins=old.origins | new.origins)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind(node.target, self.value(node.value))

    def _bind(self, target: ast.expr, value: Value) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value
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

    def _element_of(self, iterable: ast.expr) -> Value:
        """One element of what a for loop walks: glob results are paths under the globbed directory."""
        if isinstance(iterable, ast.Call):
            name = self.qualname(iterable.func)
            method = iterable.func.attr if isinstance(iterable.func, ast.Attribute) else None
            if name == "psutil.process_iter":
                return Value(origins=frozenset({PROCESSES}))
            if name in ("os.listdir", "os.scandir", "os.walk") and iterable.args:
                return self._under(self.value(iterable.args[0]))
            if name in ("glob.glob", "glob.iglob") and iterable.args:
                pattern = self.value(iterable.args[0])
                return Value(text=pattern.text, path_like=True)
            if method in ("glob", "rglob", "iterdir", "walk") and isinstance(iterable.func, ast.Attribute):
                return self._under(self.value(iterable.func.value))
        if isinstance(iterable, (ast.List, ast.Tuple, ast.Set)) and iterable.elts:
            return self.value(iterable.elts[0])
        value = self.value(iterable)
        return Value(origins=value.origins)

    @staticmethod
    def _under(base: Value) -> Value:
        if base.text is None:
            return Value(path_like=True)
        return Value(text=posixpath.join(base.text, UNKNOWN), path_like=True, origins=base.origins)

    # Calls ---------------------------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        name = self.qualname(node.func)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        receiver = self.value(node.func.value) if isinstance(node.func, ast.Attribute) else _NOTHING
        args = node.args
        if name is not None:
            self._check_named_call(name, node)
        if method is not None and (name is None or not name.startswith(("os.", "shutil.", "subprocess."))):
            self._check_method(method, receiver, node)
        if (name or "").startswith("?") or (receiver.qualname or "").startswith("?"):
            # A function looked up by a computed name: its string arguments may well be commands.
            for arg in args:
                text = self.value(arg).text
                if text is not None:
                    _shell(text, self.ctx)

    def _check_named_call(self, name: str, node: ast.Call) -> None:
        ctx = self.ctx
        args = node.args
        first = self.value(args[0]) if args else _NOTHING
        if name in _COMMAND_RUNNERS or name.startswith(_EXEC_PREFIXES):
            self._check_command(name, node)
        elif name in _DELETE_TREE:
            self._delete(first, recursive=True)
        elif name in _DELETE_SINGLE:
            self._delete(first, recursive=self.loops > 0)
        elif name in _MOVERS and len(args) >= 2:
            self._delete(first, recursive=name == "shutil.move", action="moves")
            check_write(self._target(self.value(args[1])), ctx, verb="moves files")
        elif name in _COPIERS and len(args) >= 2:
            check_read(self._target(first), ctx, shows=False)
            check_write(self._target(self.value(args[1])), ctx, verb="copies files")
        elif name in _CHMOD and args:
            self._chmod(first, args[1] if len(args) > 1 else None)
        elif name in _CHOWN and args:
            where = self._target(first)
            if where.kind is not PathKind.WORKSPACE:
                ctx.add("high" if where.kind is not PathKind.TEMP else "medium", f"changes the owner of {where.shown}")
            else:
                ctx.add("medium", f"changes the owner of {where.shown}")
        elif name in ("open", "io.open", "codecs.open", "os.open", "builtins.open"):
            self._open(first, self._mode(node, 1))
        elif name in _READ_OPENERS:
            path = first if args else Value(text=".env") if name == "dotenv.dotenv_values" else _NOTHING
            if path.text is not None:
                check_read(self._target(path), ctx, shows=False)
        elif name in ("exec", "eval", "compile", "builtins.exec", "builtins.eval", "execfile", "runpy.run_path"):
            self._check_exec(name.rsplit(".", 1)[-1], node)
        elif name in _UNPICKLERS and args:
            if NET in first.origins:
                ctx.add("high", f"loads pickled data from the network, which can run any code ({name})")
        elif name in ("__import__", "importlib.import_module", "builtins.__import__") and args:
            if first.text is None:
                ctx.add("medium", "imports a module whose name is computed at run time")
        elif name == "getattr" and len(args) >= 2:
            module = self.qualname(args[0])
            if module in _SENSITIVE_MODULES and self.value(args[1]).text is None:
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
        elif name in _PRINTERS:
            for arg in args:
                self._check_shown(self.value(arg))
        elif name in ("os.setuid", "os.setgid", "os.setreuid", "ctypes.CDLL", "ctypes.cdll.LoadLibrary"):
            ctx.add("medium", f"changes process privileges or loads native code ({name})")
        if name.startswith(_NETWORK_SOURCES) or name in ("urllib.request.Request",):
            self._check_sent(node)
            if name.startswith("socket."):
                self.flags.socket = True

    def _check_method(self, method: str, receiver: Value, node: ast.Call) -> None:
        ctx = self.ctx
        args = node.args
        if method in _COMMAND_METHODS and args:
            self._check_command(f".{method}", node)
        if receiver.path_like or receiver.qualname in ("pathlib.Path", "Path"):
            where = self._target(receiver)
            if method in ("unlink", "rmdir"):
                self._delete(receiver, recursive=self.loops > 0)
            elif method in ("write_text", "write_bytes", "touch", "symlink_to", "hardlink_to"):
                check_write(where, ctx)
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
        if method in ("kill", "terminate", "send_signal") and PROCESSES in receiver.origins:
            ctx.add("high", "kills every process it can find (psutil.process_iter)")
        if method in _NETWORK_SINK_METHODS and method not in ("get", "write", "connect"):
            self._check_sent(node)
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
        if name.startswith(_EXEC_PREFIXES) and len(args) >= 2:
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
        if words and words[0] in _INTERACTIVE_SHELLS and (len(words) == 1 or words[1] == "-i"):
            self.flags.interactive_shell = True
        if name == "pty.spawn":
            self.flags.interactive_shell = True
        _shell(text, ctx)

    def _command_text(self, node: ast.expr, value: Value) -> str | None:
        if value.text is not None:
            return value.text.replace(UNKNOWN, "$__unknown")
        if isinstance(node, (ast.List, ast.Tuple)):
            parts = []
            for element in node.elts:
                if isinstance(element, ast.Starred):
                    parts.append("$__unknown")
                    continue
                text = self.value(element).text
                if text is None and self.qualname(element) == "sys.executable":
                    text = "python"
                parts.append(shlex.quote(text) if text is not None else "$__unknown")
            return " ".join(parts).replace(shlex.quote(UNKNOWN), "$__unknown")
        return None

    def _check_exec(self, name: str, node: ast.Call) -> None:
        ctx = self.ctx
        if not node.args:
            return
        code = node.args[0]
        value = self.value(code)
        if name == "run_path":
            if value.text is not None and self._normalised(value.text) in ctx.downloaded:
                ctx.add("high", f"runs a script it just downloaded: {value.text}")
            return
        if NET in value.origins:
            ctx.add("high", f"downloads code and runs it straight away ({name})")
        elif ENCODED in value.origins:
            ctx.add("high", f"runs hidden (encoded) code ({name})")
        elif isinstance(code, ast.Constant) and isinstance(code.value, str):
            self.ctx.depth += 1
            try:
                assess_python(code.value, ctx)
            finally:
                self.ctx.depth -= 1
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

    def _delete(self, path: Value, *, recursive: bool, action: str = "deletes") -> None:
        check_delete(self._target(path), self.ctx, recursive=recursive, action=action,
                     unknown_matters=action == "deletes")

    def _open(self, path: Value, mode: str | None) -> None:
        where = self._target(path)
        if mode is None or not any(c in mode for c in "wax+"):
            check_read(where, self.ctx, shows=False)
        else:
            check_write(where, self.ctx)

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

    def _target(self, value: Value) -> Target:
        return classify_path(value.text if value.text is not None else UNKNOWN, self.ctx)

    def _normalised(self, path: str) -> str:
        if path.startswith("~"):
            path = self.ctx.home + path[1:]
        base = self.ctx.cwd or self.ctx.workspace or "."
        return posixpath.normpath(posixpath.join(base, path))

    def finish(self) -> None:
        if self.flags.dup2 and self.flags.interactive_shell:
            self.ctx.add("high", "connects a shell to another machine (reverse shell)")

    # Values --------------------------------------------------------------------------------------------

    def qualname(self, node: ast.expr) -> str | None:
        """The dotted name an expression refers to, through imports ("sh.rmtree" -> "shutil.rmtree")."""
        if isinstance(node, ast.Name):
            known = self.names.get(node.id)
            if known is not None:
                return known.qualname
            return node.id if node.id not in self.names else None
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            if base is None:
                return None
            return f"{base}.{node.attr}"
        if isinstance(node, ast.Call):
            func = self.qualname(node.func)
            if func in ("__import__", "importlib.import_module") and node.args:
                text = self.value(node.args[0]).text
                return text if text is not None and UNKNOWN not in text else "?import"
            if func == "getattr" and len(node.args) >= 2:
                base = self.qualname(node.args[0])
                attr = self.value(node.args[1]).text
                if base is not None and attr is not None and UNKNOWN not in attr:
                    return f"{base}.{attr}"
                return "?getattr"
            if func in ("pathlib.Path", "Path", "pathlib.PurePath", "pathlib.PosixPath"):
                return None
        return None

    def value(self, node: ast.expr) -> Value:
        try:
            return self._value(node)
        except RecursionError:
            return _NOTHING

    def _value(self, node: ast.expr) -> Value:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return Value(text=node.value)
            if isinstance(node.value, bytes):
                return Value(text=node.value.decode("latin-1"))
            return _NOTHING
        if isinstance(node, ast.JoinedStr):
            texts: list[str] = []
            origins: frozenset[str] = frozenset()
            for part in node.values:
                if isinstance(part, ast.Constant):
                    texts.append(str(part.value))
                elif isinstance(part, ast.FormattedValue):
                    inner = self.value(part.value)
                    origins |= inner.origins
                    texts.append(inner.text if inner.text is not None else UNKNOWN)
            return Value(text="".join(texts), origins=origins)
        if isinstance(node, ast.Name):
            known = self.names.get(node.id)
            if known is not None:
                return known
            if node.id == "__file__":
                return Value(text="./" + UNKNOWN, path_like=True)
            return Value(qualname=node.id) if node.id in _BUILTIN_NAMES else _NOTHING
        if isinstance(node, ast.Attribute):
            name = self.qualname(node)
            if name == "os.environ":
                return Value(origins=frozenset({ENV}), qualname=name)
            if name in ("sys.executable",):
                return Value(text="python")
            if name in ("os.sep", "os.path.sep"):
                return Value(text="/")
            if name is not None:
                return Value(qualname=name)
            base = self.value(node.value)
            if base.path_like and base.text is not None:
                if node.attr == "parent":
                    return Value(text=posixpath.dirname(base.text) or ".", path_like=True, origins=base.origins)
                if node.attr in ("name", "stem", "suffix"):
                    return Value(origins=base.origins)
            return Value(origins=base.origins)
        if isinstance(node, ast.BinOp):
            left, right = self.value(node.left), self.value(node.right)
            origins = left.origins | right.origins
            if isinstance(node.op, ast.Div) and (left.path_like or right.path_like):
                return Value(text=_join(left.text, right.text), path_like=True, origins=origins)
            if isinstance(node.op, ast.Add):
                if left.text is not None or right.text is not None:
                    text = (left.text if left.text is not None else UNKNOWN) + (
                        right.text if right.text is not None else UNKNOWN
                    )
                    return Value(text=text, origins=origins, path_like=left.path_like)
            if isinstance(node.op, ast.Mod) and left.text is not None:
                return Value(text=re.sub(r"%[-#0 +]*\d*(?:\.\d+)?[sdrif]", UNKNOWN, left.text), origins=origins)
            return Value(origins=origins)
        if isinstance(node, ast.Call):
            return self._call_value(node)
        if isinstance(node, ast.Subscript):
            base = self.value(node.value)
            if base.qualname == "os.environ":
                key = self.value(node.slice).text
                return Value(text="~") if key == "HOME" else Value(text=UNKNOWN)
            return Value(origins=base.origins)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return Value(origins=_union(self.value(e).origins for e in node.elts))
        if isinstance(node, ast.Dict):
            values = [self.value(v) for v in node.values if v is not None]
            # {**os.environ} is a None key with os.environ as value: its origins come through.
            return Value(origins=_union(v.origins for v in values))
        if isinstance(node, ast.Starred):
            return self.value(node.value)
        if isinstance(node, ast.IfExp):
            body, orelse = self.value(node.body), self.value(node.orelse)
            return Value(origins=body.origins | orelse.origins)
        if isinstance(node, ast.Await):
            return self.value(node.value)
        return _NOTHING

    def _call_value(self, node: ast.Call) -> Value:
        name = self.qualname(node.func)
        args = [self.value(a) for a in node.args]
        keyword_values = [self.value(k.value) for k in node.keywords]
        origins = _union(v.origins for v in args + keyword_values)
        if name in ("os.path.join", "posixpath.join", "pathlib.Path", "Path", "pathlib.PurePath",
                    "pathlib.PosixPath", "pathlib.PurePosixPath"):
            text: str | None = "." if not args else args[0].text
            for arg in args[1:]:
                text = _join(text, arg.text)
            return Value(text=text, path_like=True, origins=origins)
        if name in ("os.path.expanduser", "os.path.expandvars", "os.path.abspath", "os.path.realpath",
                    "os.path.normpath", "os.fspath", "str", "os.fsencode", "os.fsdecode"):
            first = args[0] if args else _NOTHING
            return Value(text=first.text, path_like=first.path_like, origins=first.origins)
        if name in ("os.path.dirname",):
            first = args[0] if args else _NOTHING
            text = posixpath.dirname(first.text) if first.text is not None else None
            return Value(text=text, path_like=True)
        if name in ("pathlib.Path.home", "Path.home"):
            return Value(text="~", path_like=True)
        if name in ("pathlib.Path.cwd", "Path.cwd", "os.getcwd"):
            return Value(text=".", path_like=True)
        if name in ("tempfile.gettempdir",):
            return Value(text="/tmp", path_like=True)
        if name in ("tempfile.mkdtemp", "tempfile.mkstemp", "tempfile.TemporaryDirectory",
                    "tempfile.NamedTemporaryFile"):
            return Value(text="/tmp/" + UNKNOWN, path_like=True)
        if name in ("os.getenv", "os.environ.get", "os.environ.setdefault"):
            key = args[0].text if args else None
            return Value(text="~") if key == "HOME" else Value(text=None)
        if name in ("dict", "os.environ.copy", "os.environ.items", "os.environ.keys", "os.environ.values") and (
            name != "dict" or origins
        ):
            return Value(origins=origins | ({ENV} if name.startswith("os.environ") else set()))
        if name in _DECODERS:
            return Value(origins=origins | {ENCODED})
        if name in ("dotenv.dotenv_values",):
            return Value(origins=origins | {DOTENV})
        if name in ("open", "io.open", "codecs.open") and args:
            return Value(origins=origins | self._secret_origin_value(args[0]))
        if name is not None and name.startswith(_NETWORK_SOURCES) and not name.startswith("socket."):
            return Value(origins=origins | {NET})
        if name in _COMMAND_RUNNERS and node.args:
            text = self.value(node.args[0]).text
            if text is not None and text.split()[:1] in (["env"], ["printenv"], ["set"]):
                return Value(origins=origins | {ENV})
        if isinstance(node.func, ast.Attribute):
            receiver = self.value(node.func.value)
            method = node.func.attr
            if receiver.qualname == "os.environ" and method in ("copy", "items", "keys", "values"):
                return Value(origins=frozenset({ENV}))
            if receiver.path_like:
                if method in ("joinpath", "__truediv__"):
                    text = receiver.text
                    for arg in args:
                        text = _join(text, arg.text)
                    return Value(text=text, path_like=True, origins=receiver.origins)
                if method in ("expanduser", "resolve", "absolute", "with_name", "with_suffix"):
                    return Value(text=receiver.text if method not in ("with_name", "with_suffix") else None,
                                 path_like=True, origins=receiver.origins)
                if method in ("read_text", "read_bytes", "open"):
                    return Value(origins=receiver.origins | self._secret_origin_value(receiver))
            if method in ("read", "readlines", "readline", "decode", "json", "text", "content", "getvalue",
                          "iter_content", "format"):
                return Value(origins=receiver.origins | origins)
            if receiver.qualname is not None and receiver.qualname.startswith(_NETWORK_SOURCES):
                return Value(origins=receiver.origins | {NET})
            return Value(origins=receiver.origins | origins)
        if name is not None and name.startswith("?"):
            return Value(qualname=name)
        return Value(origins=origins)

    def _secret_origin_value(self, path: Value) -> set[str]:
        if path.text is None:
            return set()
        kind = classify_path(path.text, self.ctx).kind
        if kind in (PathKind.CREDENTIAL, PathKind.HISTORY):
            return {SECRET}
        if kind is PathKind.DOTENV:
            return {DOTENV}
        return set()


# Modules whose functions, looked up by a computed name, could be anything from system() to rmtree().
_SENSITIVE_MODULES = frozenset({"os", "subprocess", "shutil", "builtins", "__builtins__", "sys", "importlib",
                                "ctypes", "pty", "socket", "posix", "nt", "pathlib"})
_BUILTIN_NAMES = frozenset({"open", "exec", "eval", "compile", "__import__", "getattr", "print", "dict", "str",
                            "display", "execfile"})


def _join(left: str | None, right: str | None) -> str | None:
    if right is not None and right.startswith(("/", "~")):
        return right
    if left is None:
        return None if right is None else UNKNOWN + "/" + right
    return posixpath.join(left, right if right is not None else UNKNOWN)


def _union(items: Iterator[frozenset[str]] | list[frozenset[str]]) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    for item in items:
        out |= item
    return out
