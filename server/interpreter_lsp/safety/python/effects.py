"""Python effects beyond the classic rules in scan.py: the program chosen by `executable=` or
`os.posix_spawn`'s argv, writes through `os.open`/`io.FileIO` and pandas/numpy/matplotlib writers,
variables that make later programs run a command (`os.environ["GIT_SSH_COMMAND"] = ...`), SQL that
destroys data, SDK calls that delete elsewhere (boto3, docker, redis, kubernetes, paramiko ...), and
containers given the machine (`privileged=True`).
"""

from __future__ import annotations

import ast
import re

from interpreter_lsp.safety import allowlist as A
from interpreter_lsp.safety.context import UNKNOWN
from interpreter_lsp.safety.effects import destructive_sql, set_variables
from interpreter_lsp.safety.places import PathKind, check_read, check_write
from interpreter_lsp.safety.python.values import Evaluator, Value, shown

# SDK methods that delete or destroy data or machines elsewhere (boto3, google-cloud, azure, docker, redis,
# kubernetes, huggingface_hub, pymongo, sqlalchemy ...).
_DESTROYING = re.compile(
    r"^(delete|destroy|terminate|purge|flush|truncate|wipe|drop|prune|deregister|remove)_(?!duplicates$)\w+$"
    r"|^(flushall|flushdb|drop_all|dropDatabase|drop_database|drop_collection|purge|destroy|prune|truncate"
    r"|delete_many|deleteMany)$"
)
_SQL_METHODS = frozenset({"execute", "executemany", "executescript", "exec_driver_sql", "raw", "sql", "query",
                          "run_sql", "read_sql", "read_sql_query", "text", "command", "eval", "mogrify"})
_REMOTE_COMMAND_METHODS = frozenset({"exec_command", "exec_run", "run_command", "send_command"})
_OS_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_APPEND", "O_CREAT", "O_TRUNC")


class Effects(Evaluator):
    """Mixed into the scan: each check reads the call the scan is visiting."""

    def check_effects(self, name: str | None, method: str | None, node: ast.Call) -> None:
        ctx = self.ctx
        self.check_files(name, node)
        if name is not None:
            if any(k.arg == "executable" for k in node.keywords) and name.startswith(("subprocess.", "asyncio.")):
                self._executable(node)
            if name in ("os.posix_spawn", "os.posix_spawnp") and len(node.args) >= 2:
                self._spawn_argv(node)
            if name == "os.open" and node.args:
                self._os_open(node)
            if name in ("io.FileIO", "_io.FileIO") and node.args:
                mode = self.value(node.args[1]).text if len(node.args) > 1 else "r"
                if mode is None or any(c in mode for c in "wax+"):
                    self._writes(node.args[0])
            if name in ("os.putenv", "os.environ.setdefault") and len(node.args) >= 2:
                self.env_set([(self.value(node.args[0]).text, node.args[1])])
            if name == "os.environ.update" and node.args and isinstance(node.args[0], ast.Dict):
                self.env_set(list(zip([self.value(k).text if k else None for k in node.args[0].keys],
                                      node.args[0].values, strict=True)))
        for keyword in node.keywords:
            if keyword.arg == "env" and isinstance(keyword.value, ast.Dict):
                self.env_set(list(zip([self.value(k).text if k else None for k in keyword.value.keys],
                                      keyword.value.values, strict=True)))
            elif keyword.arg == "privileged" and isinstance(keyword.value, ast.Constant) and keyword.value.value:
                ctx.add("high", "gives a container full access to this machine (privileged=True)")
            elif keyword.arg in ("volumes", "binds", "mounts") and isinstance(keyword.value, (ast.Dict, ast.List)):
                self._volumes(keyword.value)
        if method is None:
            return
        if method in A.WRITER_METHODS and method not in ("write_text", "write_bytes", "dump"):
            target = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg == A.WRITER_METHODS[method]), None)
            if target is not None:
                self._writes(target, verb="writes")
        if method in _SQL_METHODS or (name or "").endswith(("sqlalchemy.text", ".sql.text")):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                text = self.value(arg).text
                statement = destructive_sql(text) if text else None
                if statement is not None:
                    ctx.add("high", f"deletes or overwrites data in a database ({statement})")
        local = (name or "").startswith(("os.", "shutil.", "pathlib.", "Path."))  # files: the classic rules
        if (not local and _DESTROYING.match(method)) or (method == "remove" and any(
                k.arg == "force" and isinstance(k.value, ast.Constant) and k.value.value for k in node.keywords)):
            ctx.add("high", f"deletes data or resources through a remote service or database ({shown(node.func)})")
        elif method == "delete" and isinstance(node.func, ast.Attribute) and _bulk(node.func.value):
            ctx.add("high", f"deletes data through a remote service ({shown(node.func)})")
        if method in _REMOTE_COMMAND_METHODS and node.args:
            text = self.value(node.args[0]).text
            ctx.add("medium", f"runs a command on another machine or container ({method})")
            if text is not None:
                ctx.nested("shell", text.replace(UNKNOWN, "$__unknown"))

    def check_internal_call(self, node: ast.Call) -> None:
        """`().__class__.__base__.__subclasses__()[n].__init__.__globals__["system"]("rm -rf ~")`: a function
        reached through Python's internals, called with text: the text is rated as the command it may be."""
        if not any(isinstance(n, ast.Attribute) and n.attr in ("__globals__", "__subclasses__", "__builtins__",
                                                                "__dict__", "__getattribute__")
                   for n in ast.walk(node.func)):
            return
        for arg in node.args:
            text = self.value(arg).text
            if text is not None:
                self.ctx.nested("shell", text.replace(UNKNOWN, "$__unknown"))

    def check_files(self, name: str | None, node: ast.Call) -> None:
        """The allowlist's readers and writers (pandas, numpy, matplotlib) against the places they touch."""
        if name is None:
            return
        name = _canonical(name)
        if (name in A.READERS and name != "open") or name.startswith("pandas.read_"):
            position, keyword = A.READERS.get(name) or (0, "")
            source = node.args[position] if len(node.args) > position else next(
                (k.value for k in node.keywords if k.arg == keyword), None)
            value = self.value(source) if source is not None else None
            if value is not None and value.text is not None:
                check_read(self._target(value, source), self.ctx, shows=False)
        elif name in A.WRITERS:
            position, keyword = A.WRITERS[name]
            target = node.args[position] if len(node.args) > position else next(
                (k.value for k in node.keywords if k.arg == keyword), None)
            if target is not None:
                self._writes(target)

    def env_set(self, pairs: list[tuple[str | None, ast.expr]]) -> None:
        named = [(key, self.value(value).text or "…") for key, value in pairs if key is not None]
        set_variables(named, self.ctx)

    def check_env_assignment(self, target: ast.expr, value: ast.expr) -> None:
        """`os.environ["GIT_SSH_COMMAND"] = "..."`: later programs run it."""
        if isinstance(target, ast.Subscript) and self.qualname(target.value) == "os.environ":
            self.env_set([(self.value(target.slice).text, value)])

    def _writes(self, node: ast.expr, verb: str = "writes") -> None:
        value = self.value(node)
        if value.text is None:
            return
        where = self._target(value, node)
        check_write(where, self.ctx, verb=verb)
        self.ctx.wrote(value.text)

    def _os_open(self, node: ast.Call) -> None:
        flags = node.args[1] if len(node.args) > 1 else None
        writes = False
        if flags is not None:
            text = ast.unparse(flags)
            writes = any(f in text for f in _OS_WRITE_FLAGS) or (
                isinstance(flags, ast.Constant) and isinstance(flags.value, int) and bool(flags.value & 0o1103))
            writes = writes or not isinstance(flags, (ast.Constant, ast.Attribute, ast.BinOp))
        if writes:
            self._writes(node.args[0])

    def _executable(self, node: ast.Call) -> None:
        executable = next(k.value for k in node.keywords if k.arg == "executable")
        program = self.value(executable).text
        self.ctx.add("medium", "chooses the program to run through executable=")
        if program is None:
            self.ctx.add("high", "runs a program chosen at run time (executable=)")
            return
        command = node.args[0] if node.args else None
        if isinstance(command, (ast.List, ast.Tuple)) and command.elts:
            rest = [self._word(e) for e in command.elts[1:]]
            self.ctx.nested("shell", " ".join([program, *rest]))
        else:
            self.ctx.nested("shell", program)

    def _spawn_argv(self, node: ast.Call) -> None:
        program = self.value(node.args[0]).text or "$__unknown"
        argv = node.args[1]
        if isinstance(argv, (ast.List, ast.Tuple)):
            rest = [self._word(e) for e in argv.elts[1:]]
            self.ctx.nested("shell", " ".join([program, *rest]))
        else:
            self.ctx.add("medium", "starts a program with arguments known only at run time (posix_spawn)")

    def _word(self, node: ast.expr) -> str:
        text = self.value(node).text
        if text is None:
            return "$__unknown"
        text = text.replace(UNKNOWN, "$__unknown")
        return text if re.fullmatch(r"[\w@%+=:,./~$-]+", text) else "'" + text.replace("'", "'\\''") + "'"

    def _volumes(self, node: ast.Dict | ast.List) -> None:
        keys = node.keys if isinstance(node, ast.Dict) else node.elts
        for key in keys:
            text = self.value(key).text if key is not None else None
            if text is None:
                continue
            where = self._target(Value(text=text.split(":", 1)[0]), key)
            if where.kind in (PathKind.ROOT, PathKind.HOME, PathKind.SYSTEM, PathKind.CREDENTIAL, PathKind.DEVICE):
                self.ctx.add("high", f"gives a container access to {where.shown}")


_ALIASES = {"np.": "numpy.", "pd.": "pandas.", "plt.": "matplotlib.pyplot.", "mpl.": "matplotlib."}


def _canonical(name: str) -> str:
    for short, full in _ALIASES.items():
        if name.startswith(short):
            return full + name[len(short):]
    return name


def _bulk(node: ast.expr) -> bool:
    """`bucket.objects.all().delete()`, `s3.Bucket("x").delete()`, `Model.objects.filter(...).delete()`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in ("all", "filter", "Bucket", "Object", "Table", "bucket", "blob", "collection",
                                  "Queue", "Topic", "Instance", "objects")
    return isinstance(node, ast.Attribute) and node.attr in ("objects",)
