"""The allowlist prover for Python: "low" only when every operation in the code is on the allowlist
(safety/allowlist.py). It does not look for danger (the rules in scan.py do); it looks for proof of
harmlessness, and whatever it cannot prove goes to `Context.not_proven`, which makes the code at least
medium with the reason "not on the allowlist: ...".

Every value the code makes is tracked by where it comes from: an allowlisted module or function, data made
by allowlisted operations in this cell (any public method of such data is pure, except the ones that write,
fetch or evaluate text: checked or refused), a path whose text is known, or a name this cell did not define
(a value from an earlier cell or a parameter: its type cannot be proven, so only method names that are pure
on everything it could be are accepted).
"""

from __future__ import annotations

import ast
import posixpath
from dataclasses import dataclass

from interpreter_lsp.safety import allowlist as A
from interpreter_lsp.safety.context import UNKNOWN, Context
from interpreter_lsp.safety.places import unproven_access

_MODULE, _FUNC, _DATA, _FOREIGN, _LOCAL, _BAD = "module", "func", "data", "foreign", "local", "bad"
_MAX_TEXT = 4096
_Keywords = dict[str | None, "Thing"]


@dataclass(frozen=True)
class Thing:
    """What the prover knows about a value."""

    kind: str
    name: str = ""  # module or function name; for data: what made it ("open:w", "io.StringIO", "rcParams")
    text: str | None = None  # a string or path known in full (UNKNOWN for pieces known at run time)
    path: bool = False
    receiver: Thing | None = None  # for a method: the object it is bound to
    attr: str = ""  # for a method: its name


DATA = Thing(_DATA)
FOREIGN = Thing(_FOREIGN)
BAD = Thing(_BAD)
_PURE_ALL = A.PURE_MODULES
_MODULES = A.PURE_MODULES | frozenset(A.NAMED)
_PATH_PURE = frozenset({"name", "stem", "suffix", "suffixes", "parent", "parents", "parts", "with_suffix",
                        "with_name", "with_stem", "joinpath", "as_posix", "is_absolute", "relative_to", "match",
                        "exists", "is_file", "is_dir", "stat", "resolve", "absolute", "anchor", "drive", "root",
                        "expanduser", "is_relative_to", "samefile", "lstat", "is_symlink"})
_PATH_LIST = frozenset({"glob", "rglob", "iterdir", "walk"})
_PATH_READ = frozenset({"read_text", "read_bytes", "open"})
_SAFE_RC_PREFIXES = ("figure.", "font.", "axes.", "lines.", "xtick.", "ytick.", "legend.", "grid.", "image.cmap",
                     "patch.", "scatter.", "hist.", "boxplot.", "errorbar.", "date.", "savefig.dpi",
                     "savefig.bbox", "savefig.format", "markers.", "pcolor.", "contour.", "polaraxes.")
_PURE_BUILTIN_ATTRS = frozenset({"str", "int", "float", "dict", "list", "set", "tuple", "bytes", "frozenset",
                                 "bool", "complex", "object", "type"})


def prove_python(tree: ast.AST, ctx: Context) -> None:
    """Add to `ctx.unproven` every operation in `tree` that the allowlist does not cover."""
    prover = _Prover(ctx)
    try:
        prover.visit(tree)
    except RecursionError:
        ctx.not_proven("code nested too deeply to check")


class _Prover(ast.NodeVisitor):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.names: dict[str, Thing] = {}
        self._called: set[int] = set()

    def refuse(self, what: str) -> Thing:
        self.ctx.not_proven(what)
        return BAD

    def visit(self, node: ast.AST) -> None:
        self.ctx.step()
        super().visit(node)

    # Statements ----------------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            module = alias.name
            if module not in _MODULES:
                self.refuse(f"imports {module}")
                bound = BAD
            else:
                # `import scipy.stats` binds `scipy`, through which only allowlisted submodules are reached.
                bound = Thing(_MODULE, module if alias.asname else module.split(".")[0])
            self.names[alias.asname or module.split(".")[0]] = bound

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module == "__future__":
            return
        submodules = all(f"{module}.{alias.name}" in _MODULES for alias in node.names)
        if node.level or (module not in _MODULES and not submodules):
            self.refuse(f"imports from {'.' * node.level}{module}")
            for alias in node.names:
                self.names[alias.asname or alias.name] = BAD
            return
        for alias in node.names:
            if alias.name == "*":
                continue  # names it binds are unknown here: using one is calling a foreign name
            self.names[alias.asname or alias.name] = self._member(Thing(_MODULE, module), alias.name)

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.expr(node.value)
        for target in node.targets:
            self._store(target, value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._store(node.target, self.expr(node.value))

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        value = self.expr(node.value)
        if isinstance(node.target, ast.Name):
            old = self.names.get(node.target.id, FOREIGN)
            text = old.text + value.text if old.text is not None and value.text is not None else None
            self.names[node.target.id] = Thing(old.kind if old.kind in (_DATA, _FOREIGN) else _DATA, text=text)
        else:
            self._store(node.target, value)

    def _store(self, target: ast.expr, value: Thing) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            part = value if value.kind in (_FOREIGN, _BAD) else DATA
            for element in target.elts:
                self._store(element.value if isinstance(element, ast.Starred) else element, part)
        elif isinstance(target, ast.Attribute):
            owner = self.expr(target.value)
            if owner.kind == _MODULE:
                self.refuse(f"changes {owner.name}.{target.attr} (replaces part of a module)")
            elif owner.kind == _FUNC and not owner.name.startswith(("pandas.options.display", "pandas.options.mode")):
                self.refuse(f"changes {owner.name}.{target.attr} (a setting of a library)")
            elif target.attr.startswith("_"):
                self.refuse(f"changes {target.attr} of an object")
        elif isinstance(target, ast.Subscript):
            owner = self.expr(target.value)
            key = self.expr(target.slice)
            if owner.kind == _DATA and owner.name == "rcParams":
                if key.text is None or not key.text.startswith(_SAFE_RC_PREFIXES):
                    self.refuse(f"sets matplotlib's rcParams[{key.text or '…'!r}] (some settings run programs)")

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            self.expr(decorator)
        self._defaults(node.args)
        if node.returns is not None:
            self.expr(node.returns)
        self.names[node.name] = Thing(_LOCAL, node.name)
        self._body(node.body, _parameters(node.args))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expr in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.expr(expr)
        self.names[node.name] = Thing(_LOCAL, node.name)
        self._body(node.body, [])

    def _defaults(self, args: ast.arguments) -> None:
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            self.expr(default)

    def _body(self, body: list[ast.stmt], parameters: list[str]) -> None:
        saved = dict(self.names)
        for name in parameters:
            self.names[name] = FOREIGN  # what a caller passes in cannot be proven here
        try:
            for statement in body:
                self.visit(statement)
        finally:
            self.names = saved

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._store(node.target, self._element(self.expr(node.iter)))
        for statement in [*node.body, *node.orelse]:
            self.visit(statement)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            value = self.expr(item.context_expr)
            if item.optional_vars is not None:
                self._store(item.optional_vars, value)
        for statement in node.body:
            self.visit(statement)

    visit_AsyncWith = visit_With

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.expr(node.type)
        if node.name:
            self.names[node.name] = DATA
        for statement in node.body:
            self.visit(statement)

    def visit_Expr(self, node: ast.Expr) -> None:
        self.expr(node.value)

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.expr(node.value)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            if isinstance(target, ast.Attribute) and self.expr(target.value).kind == _MODULE:
                self.refuse(f"deletes part of a module ({ast.unparse(target)[:40]})")

    def visit_Global(self, node: ast.Global) -> None:
        return

    visit_Nonlocal = visit_Global

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name:
            self.names[node.name] = DATA
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self.names[node.name] = DATA

    def generic_visit(self, node: ast.AST) -> None:
        # Statements without a visitor of their own (if, while, try, assert, raise, match ...): their
        # expressions are checked, their statements visited.
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child)
            else:
                self.visit(child)

    # Expressions ---------------------------------------------------------------------------------------

    def expr(self, node: ast.expr) -> Thing:
        self.ctx.step()
        method = getattr(self, f"_expr_{type(node).__name__}", None)
        if method is not None:
            return method(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child)
            elif isinstance(child, ast.comprehension):
                self._comprehension(child)
            elif isinstance(child, ast.arguments):
                self._defaults(child)
        return DATA

    def _expr_Constant(self, node: ast.Constant) -> Thing:
        if isinstance(node.value, str):
            return Thing(_DATA, text=node.value[:_MAX_TEXT])
        return DATA

    def _expr_JoinedStr(self, node: ast.JoinedStr) -> Thing:
        texts: list[str] = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                texts.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                inner = self.expr(part.value)
                if part.format_spec is not None:
                    self.expr(part.format_spec)
                texts.append(inner.text if inner.text is not None and part.format_spec is None else UNKNOWN)
        return Thing(_DATA, text="".join(texts)[:_MAX_TEXT])

    def _expr_BinOp(self, node: ast.BinOp) -> Thing:
        left, right = self.expr(node.left), self.expr(node.right)
        if isinstance(node.op, ast.Div) and (left.path or right.path):
            return Thing(_DATA, text=_join(left.text, right.text), path=True)
        if isinstance(node.op, ast.Add) and (left.text is not None or right.text is not None):
            text = (UNKNOWN if left.text is None else left.text) + (UNKNOWN if right.text is None else right.text)
            return Thing(_DATA, text=text[:_MAX_TEXT])
        return Thing(_FOREIGN) if _FOREIGN in (left.kind, right.kind) else DATA

    def _expr_Name(self, node: ast.Name) -> Thing:
        thing = self._name(node.id)
        if id(node) not in self._called:
            self._as_value(thing, node.id)
        return thing

    def _name(self, name: str) -> Thing:
        known = self.names.get(name)
        if known is not None:
            return known
        if name in A.BUILTINS or name == "open" or name == "getattr":
            return Thing(_FUNC, name)
        if name.startswith("__") and name != "__name__":
            return self.refuse(f"uses {name} (Python's internals)")
        if name in A.ALIASES:
            return Thing(_MODULE, A.ALIASES[name])
        if name in _MODULES:
            return Thing(_MODULE, name)
        if name in A.MODULE_NAMES:
            return self.refuse(f"uses {name}")
        if name in ("eval", "exec", "compile", "setattr", "delattr", "globals", "locals", "vars", "input",
                    "breakpoint", "help", "exit", "quit", "memoryview", "get_ipython"):
            return self.refuse(f"uses {name}()")
        return FOREIGN

    def _as_value(self, thing: Thing, shown: str) -> None:
        """A function named without being called: checked ones (open, to_csv ...) cannot be passed around."""
        if thing.kind == _FUNC and (thing.name in A.READERS or thing.name in A.WRITERS
                                    or thing.name in ("getattr", "os.makedirs", "os.mkdir")):
            self.refuse(f"passes {shown} around as a value (where it reads or writes cannot be checked)")
        elif thing.kind in (_DATA, _FOREIGN) and thing.receiver is not None and (
                thing.attr in A.WRITER_METHODS or thing.attr in A.UNSAFE_METHODS
                or (thing.receiver.path and thing.attr not in _PATH_PURE)):
            self.refuse(f"passes .{thing.attr} around as a value (where it writes cannot be checked)")

    def _expr_Attribute(self, node: ast.Attribute) -> Thing:
        owner = self.expr(node.value)
        thing = self._attribute(owner, node.attr, node)
        if id(node) not in self._called:
            self._as_value(thing, ast.unparse(node)[:40])
        return thing

    def _attribute(self, owner: Thing, attr: str, node: ast.Attribute) -> Thing:
        if owner.kind == _BAD:
            return BAD
        if attr.startswith("_"):
            return self.refuse(f"reaches {attr} (Python's internals or a private part)")
        if owner.kind == _MODULE:
            return self._member(owner, attr)
        if owner.kind == _FUNC:
            if owner.name in _PURE_BUILTIN_ATTRS or owner.name.startswith(("pandas.", "numpy.", "sklearn.")):
                if attr in A.UNSAFE_METHODS or attr in A.WRITER_METHODS or attr.startswith("read_"):
                    return self.refuse(f"{owner.name}.{attr}")
                return Thing(_FUNC, f"{owner.name}.{attr}")
            if owner.name in ("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath") and attr in ("home", "cwd"):
                return Thing(_FUNC, f"pathlib.Path.{attr}")
            if owner.name == "matplotlib.style" or owner.name.startswith(("matplotlib.", "seaborn.")):
                return Thing(_FUNC, f"{owner.name}.{attr}")
            return Thing(_DATA, receiver=owner, attr=attr)
        if owner.kind == _FOREIGN:
            if attr in A.SAFE_FOREIGN_NAMES or attr in A.WRITER_METHODS or attr in ("replace", "rename"):
                return Thing(_FOREIGN, receiver=owner, attr=attr)
            where = ast.unparse(node.value)[:30]
            return self.refuse(f"uses .{attr} of {where}, which this cell did not make (its type cannot be proven)")
        # data or local: an object made by allowlisted code in this cell
        if attr in A.UNSAFE_METHODS:
            return self.refuse(f".{attr}() (runs text as code or reaches outside)")
        if owner.name == "rcParams" and attr in ("update", "setdefault"):
            return Thing(_DATA, name="rcParams.update", receiver=owner, attr=attr)
        return Thing(_DATA, receiver=owner, attr=attr, name=owner.name if attr == "rcParams" else "")

    def _member(self, module: Thing, attr: str) -> Thing:
        full = f"{module.name}.{attr}"
        if full in _MODULES:
            return Thing(_MODULE, full)
        if attr.startswith("_") or (attr in A.MODULE_NAMES and attr not in A.NAMED.get(module.name, ())):
            return self.refuse(full)
        if module.name in A.NAMED and attr in A.NAMED[module.name]:
            if attr == "rcParams":
                return Thing(_DATA, name="rcParams")
            return Thing(_FUNC, full)
        if module.name in _PURE_ALL:
            return Thing(_FUNC, full)
        return self.refuse(full)

    def _expr_Subscript(self, node: ast.Subscript) -> Thing:
        owner = self.expr(node.value)
        self.expr(node.slice)
        if owner.kind == _BAD:
            return BAD
        if owner.kind == _MODULE:
            return self.refuse(f"looks up a name in {owner.name}")
        return Thing(_FOREIGN) if owner.kind == _FOREIGN else DATA

    def _expr_Lambda(self, node: ast.Lambda) -> Thing:
        self._defaults(node.args)
        saved = dict(self.names)
        for name in _parameters(node.args):
            self.names[name] = FOREIGN
        try:
            self.expr(node.body)
        finally:
            self.names = saved
        return Thing(_LOCAL, "lambda")

    def _expr_NamedExpr(self, node: ast.NamedExpr) -> Thing:
        value = self.expr(node.value)
        self._store(node.target, value)
        return value

    def _comprehension(self, node: ast.comprehension) -> None:
        self._store(node.target, self._element(self.expr(node.iter)))
        for condition in node.ifs:
            self.expr(condition)

    def _comprehension_expr(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> Thing:
        saved = dict(self.names)
        try:
            for generator in node.generators:
                self._comprehension(generator)
            if isinstance(node, ast.DictComp):
                self.expr(node.key)
                self.expr(node.value)
            else:
                self.expr(node.elt)
        finally:
            self.names = saved
        return DATA

    _expr_ListComp = _expr_SetComp = _expr_GeneratorExp = _expr_DictComp = _comprehension_expr

    def _element(self, iterable: Thing) -> Thing:
        if iterable.kind in (_FOREIGN, _BAD):
            return iterable
        if iterable.name == "names":
            return Thing(_DATA, text=UNKNOWN)
        if iterable.path:
            return Thing(_DATA, text=_join(iterable.text, UNKNOWN), path=True)
        return DATA

    # Calls ---------------------------------------------------------------------------------------------

    def _expr_Call(self, node: ast.Call) -> Thing:
        if isinstance(node.func, (ast.Name, ast.Attribute)):
            self._called.add(id(node.func))
        func = self.expr(node.func)
        args = [self.expr(a) for a in node.args]
        keywords = {k.arg: self.expr(k.value) for k in node.keywords}
        if func.kind == _BAD:
            return BAD
        if func.kind == _LOCAL:
            return DATA
        if func.kind == _FOREIGN:
            if func.receiver is None:
                return self.refuse(f"calls {ast.unparse(node.func)[:40]}, which this cell did not define")
            if func.attr in ("replace", "rename") and not _text_or_frame_edit(node):
                return self.refuse(f".{func.attr}() with one argument on a value this cell did not make (on a "
                                   "path it moves a file)")
            if func.attr in A.WRITER_METHODS:
                return self._writer_method(func, node, args, keywords)
            return FOREIGN
        if func.kind == _FUNC:
            return self._call_function(func.name, node, args, keywords)
        if func.kind == _DATA and func.receiver is not None:
            return self._call_method(func, node, args, keywords)
        if func.kind == _MODULE:
            return self.refuse(f"calls the module {func.name}")
        return DATA

    def _call_function(self, name: str, node: ast.Call, args: list[Thing], keywords: _Keywords) -> Thing:
        first = args[0] if args else None
        if name == "getattr":
            attr = node.args[1] if len(node.args) >= 2 else None
            if isinstance(attr, ast.Constant) and isinstance(attr.value, str) and len(node.args) <= 3:
                owner = args[0]
                fake = ast.Attribute(value=node.args[0], attr=attr.value, ctx=ast.Load())
                return self._attribute(owner, attr.value, fake)
            return self.refuse("getattr with a name computed at run time")
        if name == "open":
            mode = _literal(node, 1, "mode", default="r")
            return self._file(first if first is not None else keywords.get("file"), mode, node)
        if name in ("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "pathlib.PurePosixPath"):
            text = "." if not args else args[0].text
            for arg in args[1:]:
                text = _join(text, arg.text)
            return Thing(_DATA, text=text, path=True)
        if name == "pathlib.Path.home":
            return Thing(_DATA, text="~", path=True)
        if name == "pathlib.Path.cwd" or name == "os.getcwd":
            return Thing(_DATA, text=".", path=True)
        if name == "os.path.join":
            text = args[0].text if args else None
            for arg in args[1:]:
                text = _join(text, arg.text)
            return Thing(_DATA, text=text, path=True)
        if name in ("os.path.abspath", "os.path.normpath", "os.path.dirname", "os.path.basename", "str"):
            if first is not None and first.text is not None:
                text = posixpath.dirname(first.text) if name.endswith("dirname") else first.text
                return Thing(_DATA, text=text, path=first.path)
            return DATA
        if name in ("os.listdir", "os.scandir", "os.walk"):
            where = first.text if first is not None else "."
            self._check(where, write=False, what=f"lists {where or 'a directory'}")
            return Thing(_DATA, name="names")  # bare names: os.path.join(where, name) is a path under it
        if name in ("glob.glob", "glob.iglob"):
            pattern = first.text if first is not None else None
            directory = posixpath.dirname(pattern) if pattern is not None else None
            if directory is not None and any(c in directory for c in "*?["):
                directory = None
            self._check(directory or ".", write=False, what=f"lists {pattern or 'a pattern'}") if pattern else \
                self.refuse("lists a pattern known only at run time")
            return Thing(_DATA, text=directory or ".", path=True)
        if name in ("pandas.set_option", "pandas.option_context", "pandas.get_option", "pandas.reset_option"):
            for arg in args[::2] if name != "pandas.get_option" else args[:1]:
                if arg.text is None or not arg.text.startswith(("display.", "mode.", "future.")):
                    self.refuse(f"{name.split('.')[-1]}({arg.text or '…'!r}) (only display options are plain styling)")
            return DATA
        if "memory" in keywords and name.startswith("sklearn.") and keywords["memory"].text is not None:
            self.refuse(f"{name} with memory= (caches to files)")
        if name in ("os.makedirs", "os.mkdir"):
            self._check_dir(first.text if first is not None else None)
            return DATA
        if name in A.READERS:
            return self._reader(name, node, args, keywords)
        if name in A.WRITERS:
            return self._writer(name, node, args, keywords)
        if name == "matplotlib.style.use" or name == "matplotlib.pyplot.style.use":
            if first is None or first.text is None or any(c in first.text for c in "/:\\."):
                self.refuse("loads a matplotlib style from a file or URL")
            return DATA
        if name == "IPython.display.Image":
            # image bytes given as data are shown; a filename is read, a URL fetched
            source = keywords.get("url") or keywords.get("filename")
            if source is None and first is not None and first.text is not None and "data" not in keywords:
                source = first
            if source is not None:
                self._check(source.text, write=False, what="shows")
            return DATA
        if name in ("sorted", "list", "tuple", "reversed", "set", "iter") and first is not None and first.kind == _DATA:
            return first  # the same elements: a listing stays a listing
        return Thing(_DATA, name=name)

    def _call_method(self, func: Thing, node: ast.Call, args: list[Thing], keywords: _Keywords) -> Thing:
        receiver = func.receiver
        assert receiver is not None
        attr = func.attr
        if receiver.path:
            if attr in _PATH_PURE:
                text = receiver.text if attr in ("resolve", "absolute", "expanduser") else None
                if attr == "joinpath":
                    text = receiver.text
                    for arg in args:
                        text = _join(text, arg.text)
                if attr == "parent" and receiver.text is not None:
                    text = posixpath.dirname(receiver.text)
                return Thing(_DATA, text=text, path=attr in ("joinpath", "resolve", "absolute", "expanduser",
                                                              "with_suffix", "with_name", "with_stem", "parent"))
            if attr in _PATH_LIST:
                self._check(receiver.text, write=False, what=f"lists {receiver.text or 'a directory'}")
                return Thing(_DATA, text=receiver.text, path=True, name="listing")
            if attr in _PATH_READ:
                mode = _literal(node, 0, "mode", default="r") if attr == "open" else "r"
                return self._file(receiver, mode, node)
            if attr in ("write_text", "write_bytes"):
                self._check(receiver.text, write=True, what="writes")
                return DATA
            if attr == "mkdir":
                self._check_dir(receiver.text)
                return DATA
            return self.refuse(f"Path.{attr}() on {receiver.text or 'a path'}")
        if attr in A.WRITER_METHODS:
            return self._writer_method(func, node, args, keywords)
        if receiver.name.startswith("open:") and attr in ("write", "writelines"):
            return DATA  # the file was proven a data file when it was opened for writing
        if func.name == "rcParams.update":
            keys = node.args[0] if node.args else None
            if not isinstance(keys, ast.Dict) or not all(
                isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value.startswith(_SAFE_RC_PREFIXES)
                for k in keys.keys
            ):
                self.refuse("updates matplotlib's rcParams with settings that are not plain styling")
            return DATA
        return DATA

    # Files -----------------------------------------------------------------------------------------------

    def _file(self, path: Thing | None, mode: str | None, node: ast.Call) -> Thing:
        if mode is None:
            return self.refuse("opens a file in a mode known only at run time")
        writes = any(c in mode for c in "wax+")
        if path is not None and path.kind == _DATA and path.name in ("io.StringIO", "io.BytesIO"):
            return Thing(_DATA, name="open:w" if writes else "open:r")
        text = path.text if path is not None else None
        self._check(text, write=writes, what="writes" if writes else "reads")
        return Thing(_DATA, name="open:w" if writes else "open:r")

    def _check(self, text: str | None, *, write: bool, what: str) -> None:
        problem = unproven_access(text, self.ctx, write=write, suffixes=A.DATA_SUFFIXES if write else frozenset())
        if problem is not None:
            self.refuse(f"{what} {problem}")

    def _check_dir(self, text: str | None) -> None:
        problem = unproven_access(text, self.ctx, write=True)
        if problem is not None:
            self.refuse(f"makes a directory: {problem}")

    def _reader(self, name: str, node: ast.Call, args: list[Thing], keywords: _Keywords) -> Thing:
        position, keyword = A.READERS[name] or (0, "")
        source = args[position] if len(args) > position else keywords.get(keyword)
        if "storage_options" in keywords:
            self.refuse(f"{name} with storage_options (a remote file system)")
        if name == "numpy.load":
            pickle = _keyword(node, "allow_pickle")
            if pickle is not None and not (isinstance(pickle, ast.Constant) and pickle.value is False):
                self.refuse("numpy.load with allow_pickle (a pickle runs code when loaded)")
            mmap = _keyword(node, "mmap_mode")
            if mmap is not None and not (isinstance(mmap, ast.Constant) and mmap.value in (None, "r")):
                self.refuse("numpy.load with a writable mmap_mode")
        if source is not None and source.kind == _DATA and (source.name.startswith("open:")
                                                            or source.name in ("io.StringIO", "io.BytesIO")):
            return Thing(_DATA, name=name)
        if name == "pandas.read_json" and source is not None and source.text is not None and \
                source.text.lstrip()[:1] in ("{", "["):
            return Thing(_DATA, name=name)  # JSON given as text, not a file
        self._check(source.text if source is not None else None, write=False, what=f"reads ({name})")
        return Thing(_DATA, name=name)

    def _writer(self, name: str, node: ast.Call, args: list[Thing], keywords: _Keywords) -> Thing:
        position, keyword = A.WRITERS[name]
        target = args[position] if len(args) > position else keywords.get(keyword)
        if target is None and name == "sklearn.tree.export_graphviz":
            return DATA  # no file: returns the text
        self._write_target(target, f"writes ({name.rsplit('.', 1)[-1]})")
        return DATA

    def _writer_method(self, func: Thing, node: ast.Call, args: list[Thing], keywords: _Keywords) -> Thing:
        attr = func.attr
        if attr in A.NEVER_WRITER_METHODS:
            return self.refuse(f".{attr}() (a pickle, HDF5 file or database)")
        keyword = A.WRITER_METHODS[attr]
        target = args[0] if args else keywords.get(keyword) if keyword else None
        if target is None:
            if attr in ("write_text", "write_bytes", "savefig", "tofile", "to_file", "to_parquet", "to_feather",
                        "to_excel", "to_stata", "to_orc") or attr.startswith("print_"):
                return self.refuse(f".{attr}() to a file that cannot be checked")
            return DATA  # to_csv(), to_json(), to_html() ... with no file return text
        self._write_target(target, f"writes (.{attr})")
        return DATA

    def _write_target(self, target: Thing | None, what: str) -> None:
        if target is not None and target.kind == _DATA and (target.name == "open:w"
                                                            or target.name in ("io.StringIO", "io.BytesIO")):
            return  # a file already proven when opened, or memory
        self._check(target.text if target is not None else None, write=True, what=what)


def _text_or_frame_edit(node: ast.Call) -> bool:
    """`s.replace(old, new)`, `df.replace({...})`, `df.rename(columns=...)`: not Path.replace(target) or
    Path.rename(target), which take one positional argument and move a file."""
    if len(node.args) >= 2 or node.keywords:
        return True
    return len(node.args) == 1 and isinstance(node.args[0], (ast.Dict, ast.Lambda))


def _parameters(args: ast.arguments) -> list[str]:
    names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    if args.vararg:
        names.append(args.vararg.arg)
    if args.kwarg:
        names.append(args.kwarg.arg)
    return names


def _join(left: str | None, right: str | None) -> str | None:
    if right is not None and right.startswith(("/", "~")):
        return right
    if left is None:
        return None
    return posixpath.join(left, right if right is not None else UNKNOWN)


def _keyword(node: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in node.keywords if k.arg == name), None)


def _literal(node: ast.Call, position: int, keyword: str, *, default: str) -> str | None:
    value: ast.expr | None = node.args[position] if len(node.args) > position else _keyword(node, keyword)
    if value is None:
        return default
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    return None
