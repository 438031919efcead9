"""What the Python scan knows about an expression's value: a string or path it can spell out, the dotted
name it refers to through imports and assignments, and where its data comes from (the network, the
environment, a credential file, a decoded blob).
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass

from interpreter_lsp.safety.context import UNKNOWN, Context
from interpreter_lsp.safety.places import PathKind, Target, classify_path
from interpreter_lsp.safety.python.tables import (
    BUILTIN_NAMES,
    COMMAND_RUNNERS,
    DECODERS,
    DOTENV,
    ENCODED,
    ENV,
    GET_IPYTHON,
    IPYTHON_SHELL,
    NET,
    NETWORK_SOURCES,
    PROCESSES,
    SECRET,
    SECRET_ENV_PREFIX,
)
from interpreter_lsp.safety.rules import is_secret_variable


@dataclass(frozen=True)
class Value:
    """What the scan knows about an expression's value."""

    text: str | None = None  # a string or path; pieces only known at run time are UNKNOWN
    origins: frozenset[str] = frozenset()  # NET, ENV, SECRET ...
    qualname: str | None = None  # a module or function it names ("os.path.join")
    path_like: bool = False
    method: str | None = None  # a method of an object the scan cannot name (`save = df.to_csv`)


NOTHING = Value()


class Evaluator:
    """Evaluates expressions to `Value`s, following the names that imports and assignments bound."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.names: dict[str, Value] = {}

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

    def _target(self, value: Value, node: ast.expr | None = None) -> Target:
        """Where a path value points; one only known at run time is shown as the code wrote it."""
        where = classify_path(value.text if value.text is not None else UNKNOWN, self.ctx)
        if value.text is None and node is not None:
            return Target(where.kind, shown(node))
        return where

    def _normalised(self, path: str) -> str:
        if path.startswith("~"):
            path = self.ctx.home + path[1:]
        base = self.ctx.cwd or self.ctx.workspace or "."
        return posixpath.normpath(posixpath.join(base, path))

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
            full = f"{'builtins' if base == '__builtins__' else base}.{node.attr}"
            replaced = self.names.get(full)  # `np.mean = os.system` earlier: np.mean is os.system now
            return replaced.qualname if replaced is not None and replaced.qualname else full
        if isinstance(node, ast.Subscript):
            return self._looked_up(node)
        if isinstance(node, ast.Call):
            func = self.qualname(node.func)
            if func in GET_IPYTHON:
                return IPYTHON_SHELL
            if func in ("__import__", "importlib.import_module") and node.args:
                text = self.value(node.args[0]).text
                return text if text is not None and UNKNOWN not in text else "?import"
            if func == "getattr" and len(node.args) >= 2:
                base = self.qualname(node.args[0])
                attr = self.value(node.args[1]).text
                if base is not None and attr is not None and UNKNOWN not in attr:
                    return f"{'builtins' if base == '__builtins__' else base}.{attr}"
                return "?getattr"
            if func in ("pathlib.Path", "Path", "pathlib.PurePath", "pathlib.PosixPath"):
                return None
        return None

    def _looked_up(self, node: ast.Subscript) -> str | None:
        """`sys.modules["os"]`, `__builtins__["exec"]`, `os.__dict__["system"]`, `vars(builtins)[k]`: the
        function a mapping of names hands out ("?lookup" when its key is computed at run time)."""
        base = node.value
        namespace: str | None = None
        if isinstance(base, ast.Name) and base.id == "__builtins__" and "__builtins__" not in self.names:
            namespace = "builtins"
        elif isinstance(base, ast.Attribute) and base.attr == "__dict__":
            namespace = self.qualname(base.value)
        elif isinstance(base, ast.Call) and self.qualname(base.func) == "vars" and base.args:
            namespace = self.qualname(base.args[0])
        elif self.qualname(base) == "sys.modules":
            namespace = ""
        if namespace is None:
            return None
        key = self.value(node.slice).text
        if key is None or UNKNOWN in key:
            return "?lookup"
        namespace = "builtins" if namespace == "__builtins__" else namespace
        return f"{namespace}.{key}" if namespace else key

    def value(self, node: ast.expr) -> Value:
        try:
            return self._value(node)
        except RecursionError:
            return NOTHING

    def _value(self, node: ast.expr) -> Value:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return Value(text=node.value)
            if isinstance(node.value, bytes):
                return Value(text=node.value.decode("latin-1"))
            return NOTHING
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
            return Value(qualname=node.id) if node.id in BUILTIN_NAMES else NOTHING
        if isinstance(node, ast.Attribute):
            name = self.qualname(node)
            if name == "os.environ":
                return Value(origins=frozenset({ENV}), qualname=name)
            if name in ("sys.executable",):
                return Value(text="python")
            if name in ("os.sep", "os.path.sep"):
                return Value(text="/")
            if name in _SITE_PATHS:
                return Value(text=_SITE_PATHS[name], path_like=True)
            if name is not None:
                return Value(qualname=name)
            base = self.value(node.value)
            if not base.path_like:
                return Value(origins=base.origins, method=node.attr)
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
                return Value(text=join(left.text, right.text), path_like=True, origins=origins)
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
                return _environment_value(self.value(node.slice).text)
            looked_up = self._looked_up(node)
            if looked_up is not None:
                return Value(qualname=looked_up)
            if base.path_like and base.text is not None:
                return base  # site.getsitepackages()[0]: one of the paths
            return Value(origins=base.origins)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return Value(origins=union(self.value(e).origins for e in node.elts))
        if isinstance(node, ast.Dict):
            values = [self.value(v) for v in node.values if v is not None]
            # {**os.environ} is a None key with os.environ as value: its origins come through.
            return Value(origins=union(v.origins for v in values))
        if isinstance(node, ast.Starred):
            return self.value(node.value)
        if isinstance(node, ast.IfExp):
            body, orelse = self.value(node.body), self.value(node.orelse)
            return Value(origins=body.origins | orelse.origins)
        if isinstance(node, ast.Await):
            return self.value(node.value)
        return NOTHING

    def _call_value(self, node: ast.Call) -> Value:
        resolved = self.qualname(node)  # __import__("os"), getattr(os, "system"), get_ipython()
        if resolved is not None:
            return Value(qualname=resolved)
        name = self.qualname(node.func)
        args = [self.value(a) for a in node.args]
        keyword_values = [self.value(k.value) for k in node.keywords]
        origins = union(v.origins for v in args + keyword_values)
        if name in ("os.path.join", "posixpath.join", "pathlib.Path", "Path", "pathlib.PurePath",
                    "pathlib.PosixPath", "pathlib.PurePosixPath"):
            text: str | None = "." if not args else args[0].text
            for arg in args[1:]:
                text = join(text, arg.text)
            return Value(text=text, path_like=True, origins=origins)
        if name in ("os.path.expanduser", "os.path.expandvars", "os.path.abspath", "os.path.realpath",
                    "os.path.normpath", "os.fspath", "str", "os.fsencode", "os.fsdecode"):
            first = args[0] if args else NOTHING
            return Value(text=first.text, path_like=first.path_like, origins=first.origins)
        if name in ("os.path.dirname",):
            first = args[0] if args else NOTHING
            text = posixpath.dirname(first.text) if first.text is not None else None
            return Value(text=text, path_like=True)
        if name in ("pathlib.Path.home", "Path.home"):
            return Value(text="~", path_like=True)
        if name in ("pathlib.Path.cwd", "Path.cwd", "os.getcwd"):
            return Value(text=".", path_like=True)
        if name in _SITE_PATHS:
            return Value(text=_SITE_PATHS[name], path_like=True)
        if name in ("tempfile.gettempdir",):
            return Value(text="/tmp", path_like=True)
        if name in ("tempfile.mkdtemp", "tempfile.mkstemp", "tempfile.TemporaryDirectory",
                    "tempfile.NamedTemporaryFile"):
            return Value(text="/tmp/" + UNKNOWN, path_like=True)
        if name in ("os.getenv", "os.environ.get", "os.environ.setdefault"):
            found = _environment_value(args[0].text if args else None)
            return Value(origins=found.origins) if found.text == UNKNOWN else found
        if name in ("dict", "os.environ.copy", "os.environ.items", "os.environ.keys", "os.environ.values") and (
            name != "dict" or origins
        ):
            return Value(origins=origins | ({ENV} if name.startswith("os.environ") else set()))
        if name in DECODERS:
            return Value(origins=origins | {ENCODED})
        if name in ("dotenv.dotenv_values",):
            return Value(origins=origins | {DOTENV})
        if name in ("open", "io.open", "codecs.open") and args:
            return Value(origins=origins | self._secret_origin_value(args[0]))
        if name is not None and name.startswith(NETWORK_SOURCES) and not name.startswith("socket."):
            return Value(origins=origins | {NET})
        if name in COMMAND_RUNNERS and node.args:
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
                        text = join(text, arg.text)
                    return Value(text=text, path_like=True, origins=receiver.origins)
                if method in ("expanduser", "resolve", "absolute", "with_name", "with_suffix"):
                    return Value(text=receiver.text if method not in ("with_name", "with_suffix") else None,
                                 path_like=True, origins=receiver.origins)
                if method in ("read_text", "read_bytes", "open"):
                    return Value(origins=receiver.origins | self._secret_origin_value(receiver))
            if method == "join" and receiver.text is not None and node.args and isinstance(
                    node.args[0], (ast.List, ast.Tuple)):
                parts = [self.value(e).text for e in node.args[0].elts]
                if all(part is not None for part in parts):
                    return Value(text=receiver.text.join(p for p in parts if p is not None), origins=origins)
            if method in ("read", "readlines", "readline", "decode", "json", "text", "content", "getvalue",
                          "iter_content", "format"):
                return Value(origins=receiver.origins | origins)
            if receiver.qualname is not None and receiver.qualname.startswith(NETWORK_SOURCES):
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


_SHOWN = 60
# Where Python looks for .pth files and usercustomize (a file written there runs in every Python started):
# the user's site is in the home directory, the others are system (or venv) directories.
_SITE_PATHS = {
    "site.getusersitepackages": "~/.local/lib/python3/site-packages",
    "site.USER_SITE": "~/.local/lib/python3/site-packages", "site.USER_BASE": "~/.local",
    "site.getuserbase": "~/.local", "site.getsitepackages": "/usr/lib/python3/site-packages",
    "sysconfig.get_paths": "/usr/lib/python3/site-packages", "sysconfig.get_path": "/usr/lib/python3/site-packages",
    "sys.prefix": "/usr", "sys.base_prefix": "/usr", "sys.exec_prefix": "/usr",
}


def shown(node: ast.expr) -> str:
    """An expression as the code wrote it, shortened for a reason."""
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _environment_value(key: str | None) -> Value:
    """os.environ[key]: HOME is the home directory; a secret-looking name marks its value as a secret."""
    if key == "HOME":
        return Value(text="~")
    if key is not None and is_secret_variable(key):
        return Value(text=UNKNOWN, origins=frozenset({SECRET_ENV_PREFIX + key}))
    return Value(text=UNKNOWN)


def secret_names(origins: frozenset[str]) -> list[str]:
    """The secret environment variables a value was made from."""
    return sorted(o[len(SECRET_ENV_PREFIX):] for o in origins if o.startswith(SECRET_ENV_PREFIX))


def join(left: str | None, right: str | None) -> str | None:
    if right is not None and right.startswith(("/", "~")):
        return right
    if left is None:
        return None if right is None else UNKNOWN + "/" + right
    return posixpath.join(left, right if right is not None else UNKNOWN)


def union(items: Iterator[frozenset[str]] | list[frozenset[str]]) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    for item in items:
        out |= item
    return out
