"""Shell code as pipelines of simple commands: bashlex's tree walked into words, redirects and
here-documents, with variables expanded where their values are known; a word-by-word fallback for what
bashlex cannot parse (`case`, arrays).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from interpreter_lsp.imports import retrying_deadlocks
from interpreter_lsp.safety.rules import DOWNLOADERS

_HEREDOC_START = re.compile(r"<<(-?)[ \t]*(['\"]?)([\w.-]+)\2")
_DOUBLE_BRACKET = re.compile(r"(?<![\w\]])\[\[(?=\s)|(?<=\s)\]\](?![\w\[])")
_ARITHMETIC = re.compile(r"\$\(\([^()]*(?:\([^()]*\)[^()]*)*\)\)")
_HEREDOC_WORD = "__HEREDOC_{}__"
_TIME = re.compile(r"(^|[;&|(]|\n)([ \t]*)time[ \t]+(?:-p[ \t]+)?", re.MULTILINE)
_MAX_LOOP_VALUES = 4


@dataclass
class Command:
    words: list[str]
    redirects: list[tuple[str, str]] = field(default_factory=list)  # (operator, target)
    heredoc: str | None = None
    inner_names: set[str] = field(default_factory=set)  # commands inside $(...), <(...), { ...; }
    runs_downloaded_text: bool = False  # a word holds what a download returned
    assignments: list[str] = field(default_factory=list)  # NAME=value words (they change the environment)


Pipeline = list[Command]


# --- Parsing -------------------------------------------------------------------------------------------


def _extract_heredocs(code: str) -> tuple[str, list[str]]:
    """Cut here-document bodies out of the script: `<<EOF` becomes `< __HEREDOC_n__`."""
    lines = code.split("\n")
    out: list[str] = []
    bodies: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        pending: list[tuple[bool, str]] = []

        def _replace(match: re.Match[str], line: str = line, pending: list[tuple[bool, str]] = pending) -> str:
            if match.start() > 0 and line[match.start() - 1] == "<":  # <<< here-string
                return match.group(0)
            pending.append((match.group(1) == "-", match.group(3)))
            return "< " + _HEREDOC_WORD.format(len(bodies) + len(pending) - 1)

        out.append(_HEREDOC_START.sub(_replace, line))
        i += 1
        for strip_tabs, delimiter in pending:
            body: list[str] = []
            while i < len(lines):
                candidate = lines[i].lstrip("\t") if strip_tabs else lines[i]
                i += 1
                if candidate.strip() == delimiter:
                    break
                body.append(lines[i - 1])
            bodies.append("\n".join(body))
    return "\n".join(out), bodies


def _bashlex() -> Any:
    import bashlex

    return bashlex


def _parse_with_bashlex(text: str, heredocs: list[str], known: _Known | None = None) -> list[Pipeline] | None:
    # lazy: ~90 ms to import, only when shell code is assessed, in the rater's thread (imports.py)
    bashlex = retrying_deadlocks(_bashlex)

    text = _DOUBLE_BRACKET.sub(lambda m: "[" if m.group(0) == "[[" else "]", text)
    text = _TIME.sub(r"\1\2command ", text)  # bashlex cannot read the `time` keyword; it runs what follows
    text = _ARITHMETIC.sub("0", text)
    if not text.strip():
        return []
    try:
        trees = bashlex.parse(text)
    except Exception:  # bashlex raises its own errors and NotImplementedError for unsupported syntax
        return None
    walker = _BashlexWalker(heredocs, text, known)
    try:
        for tree in trees:
            walker.visit(tree)
    except (AttributeError, IndexError, TypeError, RecursionError):
        return None
    return walker.pipelines


class _BashlexWalker:
    """Turns bashlex's tree into pipelines, expanding variables whose values are known."""

    def __init__(self, heredocs: list[str], text: str = "", known: _Known | None = None) -> None:
        self.text = text
        self.pipelines: list[Pipeline] = []
        self.heredocs = heredocs
        known = known if known is not None else _Known()
        self.values = known.values  # shared by the chunks of a long script
        self.downloaded_vars = known.downloaded_vars

    def visit(self, node: Any) -> None:
        kind = node.kind
        if kind == "pipeline":
            stages = [self._stage(part) for part in node.parts if part.kind not in ("pipe", "reservedword")]
            self.pipelines.append(stages)
        elif kind in ("command", "compound"):
            self.pipelines.append([self._stage(node)])
        elif kind == "for":
            self._visit_for(node)
        elif kind == "function":
            self._visit_children(node.parts[1:])
        else:
            self._visit_children(getattr(node, "parts", None) or getattr(node, "list", None) or [])

    def _visit_children(self, nodes: Iterable[Any]) -> None:
        for child in nodes:
            if child.kind in ("list", "pipeline", "command", "compound", "for", "if", "while", "until",
                              "function"):
                self.visit(child)

    def _visit_for(self, node: Any) -> None:
        parts = node.parts
        name = parts[1].word if len(parts) > 1 and parts[1].kind == "word" else None
        values: list[str] = []
        body: list[Any] = []
        seen_in = False
        for part in parts[2:]:
            if part.kind == "reservedword" and part.word == "in":
                seen_in = True
            elif part.kind == "reservedword" and part.word in (";", "do", "done"):
                seen_in = False
            elif part.kind == "word" and seen_in:
                values.append(self._expand(part.word))
            elif part.kind != "reservedword":
                body.append(part)
        if name is None or not values:
            self._visit_children(body)
            return
        saved = self.values.get(name)
        for value in values[:_MAX_LOOP_VALUES]:
            self.values[name] = value
            self._visit_children(body)
        if saved is None:
            self.values.pop(name, None)
        else:
            self.values[name] = saved

    def _expand(self, word: str) -> str:
        def _lookup(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            return self.values.get(name, match.group(0))

        return re.sub(r"\$\{(\w+)\}|\$(\w+)", _lookup, word)

    def _stage(self, node: Any) -> Command:
        command = Command(words=[])
        if node.kind == "compound":
            before = len(self.pipelines)
            self._visit_children(node.list)
            for pipeline in self.pipelines[before:]:
                for stage in pipeline:
                    if stage.words:
                        command.inner_names.add(posixpath.basename(stage.words[0]))
                    command.inner_names |= stage.inner_names
            for redirect in getattr(node, "redirects", []) or []:
                self._redirect(redirect, command)
            return command
        for part in node.parts:
            if part.kind == "word":
                self._substitutions(part, command)
                word = self._unquoted(part)
                if any(f"${v}" in word or f"${{{v}}}" in word for v in self.downloaded_vars):
                    command.runs_downloaded_text = True
                command.words.append(self._expand(word))
            elif part.kind == "assignment":
                command.assignments.append(str(part.word))
                inner_before = set(command.inner_names)
                self._substitutions(part, command)
                name, _, value = part.word.partition("=")
                if command.inner_names - inner_before & DOWNLOADERS:
                    self.downloaded_vars.add(name)
                if "$(" in value or "`" in value:
                    self.values.pop(name, None)
                else:
                    self.values[name] = self._expand(value)
            elif part.kind == "redirect":
                self._redirect(part, command)
        return command

    def _unquoted(self, part: Any) -> str:
        """The word with its quotes removed. bashlex keeps the inner quotes of a word made of several
        quoted pieces ('it'"'"'s'), as shlex.quote writes them; shlex reads such a word right."""
        start, end = getattr(part, "pos", (0, 0))
        raw = self.text[start:end]
        if not raw or raw.count("'") + raw.count('"') < 3 or "$(" in raw or "`" in raw:
            return str(part.word)
        try:
            words = shlex.split(raw)
        except ValueError:
            return str(part.word)
        return words[0] if len(words) == 1 else str(part.word)

    def _substitutions(self, node: Any, command: Command) -> None:
        for child in getattr(node, "parts", None) or []:
            if child.kind in ("commandsubstitution", "processsubstitution"):
                before = len(self.pipelines)
                self.visit(child.command)
                for pipeline in self.pipelines[before:]:
                    for stage in pipeline:
                        if stage.words:
                            command.inner_names.add(posixpath.basename(stage.words[0]))
                        command.inner_names |= stage.inner_names
            else:
                self._substitutions(child, command)

    def _redirect(self, node: Any, command: Command) -> None:
        heredoc = getattr(node, "heredoc", None)
        if heredoc is not None:
            command.heredoc = heredoc.value
            return
        output = node.output
        if not hasattr(output, "word"):
            return  # 2>&1 and the like
        target = self._expand(output.word)
        match = re.fullmatch(r"__HEREDOC_(\d+)__", target)
        if match and int(match.group(1)) < len(self.heredocs):
            command.heredoc = self.heredocs[int(match.group(1))]
            return
        command.redirects.append((node.type, target))


_RESERVED = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "case", "esac",
                       "{", "}", "!", "function", "in", "[[", "]]", "time", "select"})
_SEPARATORS = frozenset({";", ";;", "&&", "||", "&", "(", ")", "\n"})
_REDIRECT_OPS = frozenset({">", ">>", "<", ">|", "&>", "&>>", ">&", "<>"})


def _parse_tokens(text: str, heredocs: list[str]) -> list[Pipeline]:
    """Fallback for code bashlex cannot parse: shell words split per line, joined into commands."""
    text = text.replace("\\\n", " ")
    tokens: list[str] = []
    for line in text.split("\n"):
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            tokens.extend(lexer)
        except ValueError:
            tokens.extend(line.split())
        tokens.append("\n")
    pipelines: list[Pipeline] = []
    stages: Pipeline = []
    current = Command(words=[])
    pending_redirect: str | None = None

    def _end_stage() -> None:
        nonlocal current
        while current.words and current.words[0] in _RESERVED:
            current.words.pop(0)
        if current.words or current.redirects or current.heredoc is not None:
            stages.append(current)
        current = Command(words=[])

    for token in tokens:
        if pending_redirect is not None:
            match = re.fullmatch(r"__HEREDOC_(\d+)__", token)
            if match and int(match.group(1)) < len(heredocs):
                current.heredoc = heredocs[int(match.group(1))]
            else:
                current.redirects.append((pending_redirect, token))
            pending_redirect = None
        elif token in _REDIRECT_OPS:
            pending_redirect = token
        elif token == "|" or token == "|&":
            _end_stage()
        elif token in _SEPARATORS or set(token) <= set(";&|()"):
            _end_stage()
            if stages:
                pipelines.append(stages)
            stages = []
        else:
            current.words.append(token)
    _end_stage()
    if stages:
        pipelines.append(stages)
    return pipelines



@dataclass
class Script:
    pipelines: list[Pipeline]
    parsed: bool  # False: bashlex could not read it, so it was split word by word
    spelled: bool  # ANSI-C quoting spelled characters by code ($'\x72\x6d' is "rm")


@dataclass
class _Known:
    """What the walker learned about variables, carried from one chunk of a long script to the next."""

    values: dict[str, str] = field(default_factory=dict)
    downloaded_vars: set[str] = field(default_factory=set)


# bashlex's time grows faster than the input (16 KB: 0.2 s, 200 KB: 6 s), so long scripts are parsed in
# chunks of whole lines; a chunk that ends inside a compound command (for ... done) grows until it parses.
_CHUNK = 4_000
_MAX_CHUNK = 64_000


def parse_script(code: str, step: Callable[[], None] | None = None) -> Script:
    """The script's pipelines; ANSI-C quoted strings ($'...') decoded first, as bash does (bashlex does not).
    `step` is called between chunks (the rating's time budget)."""
    text, heredocs = _extract_heredocs(code)
    text, spelled = _decode_ansi_c(text)
    lines = text.split("\n")
    known = _Known()
    pipelines: list[Pipeline] = []
    parsed = True
    start = 0
    while start < len(lines):
        if step is not None:
            step()
        end, size = start, 0
        chunk_limit = _CHUNK
        while True:
            while end < len(lines) and size < chunk_limit:
                size += len(lines[end]) + 1
                end += 1
            chunk = "\n".join(lines[start:end])
            found = _parse_with_bashlex(chunk, heredocs, known)
            if found is not None or end >= len(lines) or size >= _MAX_CHUNK:
                break
            chunk_limit = size + _CHUNK
        if found is None:
            parsed = False
            found = _parse_tokens(chunk, heredocs)
        pipelines.extend(found)
        start = end
    return Script(pipelines, parsed, spelled)


_ANSI_C = re.compile(r"\$'((?:[^'\\]|\\.)*)'", re.DOTALL)
_ANSI_C_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)", re.DOTALL)
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
                   "t": "\t", "v": "\v"}


def _decode_ansi_c(text: str) -> tuple[str, bool]:
    """`$'\\x72m'` becomes `'rm'`; the flag says whether any character was spelled by its code."""
    if "$'" not in text:
        return text, False
    spelled = False

    def _escape(match: re.Match[str]) -> str:
        nonlocal spelled
        code = match.group(1)
        if code[0] in "xuU" and len(code) > 1:
            spelled = True
            return chr(min(int(code[1:], 16), 0x10FFFF))
        if code[0] in "01234567":
            spelled = True
            return chr(int(code, 8))
        if code[0] == "c" and len(code) > 1:
            spelled = True
            return chr(ord(code[1]) & 0x1F)
        return _SIMPLE_ESCAPES.get(code, code)

    def _string(match: re.Match[str]) -> str:
        return shlex.quote(_ANSI_C_ESCAPE.sub(_escape, match.group(1)))

    return _ANSI_C.sub(_string, text), spelled
