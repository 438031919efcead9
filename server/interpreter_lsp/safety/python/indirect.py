"""Python that reaches an operation indirectly: IPython's shell object (`get_ipython()`), functions handed
over as values (`Thread(target=os.remove)`, `functools.partial`, `map`), names looked up at run time
(`getattr`, `__builtins__[...]`, `sys.modules[...]`, `__import__`), modules and scripts written earlier in
the session, and secrets on their way to the network.

"Low" must mean the scan understood every operation: each of these is at least medium, and where the
target can be spelled out (a constant command, a constant name) it is rated as if it were called directly.
"""

from __future__ import annotations

import ast
from urllib.parse import urlsplit

from interpreter_lsp.safety.context import UNKNOWN
from interpreter_lsp.safety.places import check_unpack
from interpreter_lsp.safety.python.tables import (
    CREDENTIAL_KEYWORDS,
    DUNDER_LOOKUPS,
    GET_IPYTHON,
    IPYTHON_SHELL,
    MAPPERS,
    SENSITIVE_CALLABLES,
    SENSITIVE_MODULES,
)
from interpreter_lsp.safety.python.values import Evaluator, Value, secret_names, shown
from interpreter_lsp.safety.rules import KNOWN_API_HOSTS


def _host(url: str | None) -> str | None:
    try:
        return urlsplit(url).hostname if url is not None else None
    except ValueError:
        return None


class Indirection(Evaluator):
    """The checks for indirect operations, mixed into the scan (which provides `visit_Call`)."""

    _called: set[int]
    _aliases: set[int]

    def visit_Call(self, node: ast.Call) -> None:  # provided by the scan
        raise NotImplementedError

    # IPython ---------------------------------------------------------------------------------------------

    def check_ipython(self, name: str, node: ast.Call) -> None:
        """get_ipython() and its methods: magics, aliases, cells and system commands it runs."""
        ctx = self.ctx
        if name in GET_IPYTHON:
            ctx.add("medium", "uses IPython's own machinery (get_ipython()), which can run anything")
            return
        if not name.startswith(IPYTHON_SHELL + "."):
            return
        method = name.rsplit(".", 1)[-1]
        texts = [self.value(arg).text for arg in node.args]
        known = all(text is not None and UNKNOWN not in text for text in texts)
        if method == "run_cell_magic" and len(texts) >= 3 and known:
            ctx.nested("python", f"%%{texts[0]} {texts[1]}\n{texts[2]}")
        elif method == "run_line_magic" and len(texts) >= 2 and known:
            ctx.nested("python", f"%{texts[0]} {texts[1]}")
        elif method == "magic" and texts and known:
            ctx.nested("python", f"%{texts[0]}")
        elif method in ("run_cell", "ex", "ev", "run_code", "safe_execfile_ipy") and texts and known:
            ctx.nested("python", str(texts[0]))
        elif method in ("define_alias", "soft_define_alias") and len(texts) >= 2 and known:
            ctx.add("medium", f"defines a shell alias ({texts[0]}) that runs later: {str(texts[1])[:60]}")
            ctx.nested("shell", str(texts[1]).replace("%s", "$__unknown").replace("%l", "$__unknown"))
        elif method not in ("system", "system_raw", "system_piped", "getoutput"):
            ctx.add("medium", f"asks IPython to run something built at run time ({method})")

    # Functions handed over as values ---------------------------------------------------------------------

    def check_callables_passed(self, name: str | None, method: str | None, node: ast.Call) -> None:
        """`Thread(target=os.remove, args=(p,))`, `partial(shutil.rmtree, "/")`, `map(os.remove, files)`,
        `executor.submit(os.system, cmd)`: rated as the call they stand for, and at least medium."""
        outer = name or method or "a call"
        mapper = (name or "").rsplit(".", 1)[-1] in MAPPERS or method in MAPPERS
        args_keyword = next((k.value for k in node.keywords if k.arg == "args"), None)
        kwargs_keyword = next((k.value for k in node.keywords if k.arg == "kwargs"), None)
        candidates: list[tuple[ast.expr, list[ast.expr]]] = []
        for i, arg in enumerate(node.args):
            candidates.append((arg, list(node.args[i + 1:])))
        for keyword in node.keywords:
            if keyword.arg in ("target", "function", "func", "callback", "fn"):
                candidates.append((keyword.value, []))
        for func, rest in candidates:
            target = self.qualname(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
            if target not in SENSITIVE_CALLABLES:
                continue
            self.ctx.add("medium", f"hands {target} to {outer} to call later")
            if mapper and rest:
                element = f"(each of {shown(rest[0])})"  # a name no code can spell, shown in reasons
                self.names[element] = self._element_of(rest[0])
                self.loops += 1
                try:
                    self._call_as(func, [ast.Name(id=element, ctx=ast.Load())], [], node)
                finally:
                    self.loops -= 1
                    self.names.pop(element, None)
                continue
            if isinstance(args_keyword, (ast.Tuple, ast.List)):
                rest = list(args_keyword.elts)
            keywords = []
            if isinstance(kwargs_keyword, ast.Dict):
                pairs = zip(kwargs_keyword.keys, kwargs_keyword.values, strict=True)
                keywords = [ast.keyword(arg=k.value, value=v) for k, v in pairs
                            if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            self._call_as(func, rest, keywords, node)

    def _call_as(self, func: ast.expr, args: list[ast.expr], keywords: list[ast.keyword], where: ast.AST) -> None:
        call = ast.Call(func=func, args=args, keywords=keywords)
        ast.copy_location(call, where)
        self._called.add(id(func))
        self.visit_Call(call)

    def account_for_arguments(self, node: ast.Call) -> None:
        """Functions named as arguments are judged by `check_callables_passed`, not as loose references."""
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if isinstance(arg, (ast.Name, ast.Attribute)):
                self._aliases.add(id(arg))

    def check_reference(self, node: ast.Name | ast.Attribute) -> None:
        """A sensitive function named without being called (in a dict, a list, a return value)."""
        if id(node) in self._called or id(node) in self._aliases:
            return
        target = self.qualname(node)
        if target in SENSITIVE_CALLABLES:
            self.ctx.add("medium", f"passes {target} around as a value, to be called elsewhere")

    # Names looked up at run time -------------------------------------------------------------------------

    def check_lookup(self, name: str, node: ast.Call) -> None:
        ctx = self.ctx
        if name in ("__import__", "builtins.__import__"):
            ctx.add("medium", f"imports a module by a name given at run time ({shown(node)})")
        elif name == "getattr" and len(node.args) >= 2:
            module = self.qualname(node.args[0])
            if module in SENSITIVE_MODULES and not isinstance(node.args[1], ast.Constant):
                ctx.add("medium", f"looks up a function of {module} by a name computed at run time (getattr)")
        elif name in ("operator.methodcaller", "operator.attrgetter") and node.args:
            if name == "operator.methodcaller" or not isinstance(node.args[0], ast.Constant):
                ctx.add("medium", f"calls a method chosen by name at run time ({name})")

    def check_internals(self, node: ast.Attribute | ast.Name | ast.Subscript) -> None:
        """`x.__dict__`, `__builtins__`, `sys.modules[...]`, `globals()[...]`: any function, reached by name."""
        if isinstance(node, ast.Attribute) and node.attr in DUNDER_LOOKUPS:
            self.ctx.add("medium", f"reaches functions through Python's internals ({shown(node)})")
        elif isinstance(node, ast.Name) and node.id == "__builtins__":
            self.ctx.add("medium", "reaches Python's builtins directly (__builtins__)")
        elif isinstance(node, ast.Subscript):
            base = node.value
            if self.qualname(base) == "sys.modules":
                self.ctx.add("medium", f"looks up a module in sys.modules ({shown(node)})")
            elif isinstance(base, ast.Call) and self.qualname(base.func) in ("globals", "locals", "vars"):
                self.ctx.add("medium", f"looks up a name at run time ({shown(node)})")

    # Files written earlier in the session ----------------------------------------------------------------

    def check_written_module(self, module: str) -> None:
        path = self.ctx.written_module(module)
        if path is not None:
            reason = f"imports {module}, written earlier in this session ({path}): its code was not rated"
            self.ctx.add("medium", reason)

    def check_written_script(self, value: Value) -> None:
        if value.text is not None and self.ctx.was_written(value.text):
            self.ctx.add("medium", f"runs {value.text}, written earlier in this session (its code was not rated)")

    # Archives -------------------------------------------------------------------------------------------

    def check_extract(self, node: ast.Call, position: int) -> None:
        """extractall(path) / extract(member, path) / unpack_archive(file, dir): where the files land."""
        where: ast.expr | None = node.args[position] if len(node.args) > position else None
        for keyword in node.keywords:
            if keyword.arg in ("path", "extract_dir"):
                where = keyword.value
        value = self.value(where) if where is not None else Value(text=".")
        if value.text is not None:
            check_unpack(self._target(value), self.ctx)

    # Secrets on their way out ----------------------------------------------------------------------------

    def check_secrets_sent(self, node: ast.Call) -> None:
        """A secret environment variable in a URL, query, body or DNS name leaves the machine: high. In the
        headers of a request to the API it is meant for, it is being used: medium, and said."""
        ctx = self.ctx
        anywhere: set[str] = set()
        credentials: set[str] = set()
        url: str | None = None
        for arg in node.args:
            value = self.value(arg)
            anywhere.update(secret_names(value.origins))
            if url is None and value.text is not None and "://" in value.text:
                url = value.text
        for keyword in node.keywords:
            value = self.value(keyword.value)
            names = secret_names(value.origins)
            if keyword.arg in CREDENTIAL_KEYWORDS:
                credentials.update(names)
            else:
                anywhere.update(names)
            if keyword.arg == "url" and value.text is not None:
                url = value.text
        host = _host(url)
        for name in sorted(anywhere):
            ctx.add("high", f"sends a secret (${name}) over the network")
        for name in sorted(credentials - anywhere):
            if host is not None and any(host == h or host.endswith("." + h) for h in KNOWN_API_HOSTS):
                ctx.add("medium", f"sends ${name} to {host}")
            else:
                ctx.add("high", f"sends a secret (${name}) to {host or 'a host known only at run time'}")
