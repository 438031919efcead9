"""The contract in one place, its mirrors checked: the settings schema against docs/configuration.md, VS
Code's package.json and Neovim's known_settings; protocol.py against the clients' protocol files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from interpreter_lsp import settings

REPO = Path(__file__).resolve().parents[1]


def test_settings_mirrors_are_generated_from_the_schema() -> None:
    stale = settings.write_mirrors(REPO, check=True)
    assert stale == [], f"out of date: {stale}; run: .venv/bin/python -m interpreter_lsp.settings"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def test_every_history_event_is_documented_with_its_fields() -> None:
    import re

    import attrs

    from interpreter_lsp import protocol as p

    doc = (REPO / "docs" / "protocol.md").read_text(encoding="utf-8")
    table = doc.split("## History events", 1)[1]
    rows = dict(re.findall(r"^\| `(\w+)` \| (.*) \|$", table, re.M))
    for cls in p.HISTORY_EVENTS:
        fields = {_camel(f.name) for f in attrs.fields(cls)}
        if not fields:  # reset / undo: in the log only, named in the text
            assert f"`{cls.type}`" in table, cls.type
            continue
        assert cls.type in rows, f"history event {cls.type!r} is not in docs/protocol.md"
        documented = set(re.findall(r"[A-Za-z]+", rows[cls.type]))
        missing = fields - documented
        assert not missing, f"{cls.type}: fields {sorted(missing)} are not documented"


def test_neovim_protocol_names_match_the_server() -> None:
    """clients/neovim/lua/interpreter_lsp/protocol.lua spells every name of protocol.py the same way (it
    may hold names the server adds later, e.g. a command being built in parallel)."""
    import re

    from interpreter_lsp import protocol as p

    lua = (REPO / "clients" / "neovim" / "lua" / "interpreter_lsp" / "protocol.lua").read_text(encoding="utf-8")
    mirrored = dict(re.findall(r'^M\.(\w+) = "([^"]+)"$', lua, re.M))
    for name in (*p.ALL_COMMANDS, *p.ALL_NOTIFICATIONS, p.INPUT):
        constant = next(k for k, v in vars(p).items() if v == name and k.isupper() and not k.startswith("ALL"))
        assert mirrored.get(constant) == name, f"protocol.lua: M.{constant} should be {name!r}"


# ---- the clients' protocol files, payload fields included --------------------------------------------------

_NOTIFICATION_PARAMS = (
    "MessageParams",
    "ProposalParams",
    "OutputParams",
    "RunStatusParams",
    "TurnStatusParams",
    "KernelStatusParams",
    "InputParams",
    "ProposalStatusParams",
    "Risk",
)


def _ts_interface_fields(source: str, name: str) -> set[str]:
    import re

    match = re.search(rf"export interface {name}\b[^{{]*\{{(.*?)\n\}}", source, re.S)
    assert match, f"clients/vscode/src/protocol.ts has no interface {name}"
    return set(re.findall(r"^\s*(\w+)\??\s*:", match.group(1), re.M))


def test_protocol_ts_mirrors_every_payload_field() -> None:
    import attrs

    from interpreter_lsp import protocol as p

    source = (REPO / "clients" / "vscode" / "src" / "protocol.ts").read_text(encoding="utf-8")
    for name in _NOTIFICATION_PARAMS:
        server = {_camel(f.name) for f in attrs.fields(getattr(p, name))}
        client = _ts_interface_fields(source, name)
        assert server == client, (
            f"{name}: only in protocol.py {sorted(server - client)}, only in protocol.ts {sorted(client - server)}"
        )


def _names(module: object, prefix: str) -> set[str]:
    return {v for k, v in vars(module).items() if k.isupper() and isinstance(v, str) and v.startswith(prefix)}


def test_both_clients_spell_every_command_and_notification() -> None:
    import re

    from interpreter_lsp import protocol as p

    server = _names(p, "interpreter.") | _names(p, "interpreter/")
    ts = set(re.findall(r'"(interpreter[./]\w+)"', (REPO / "clients/vscode/src/protocol.ts").read_text()))
    lua_files = list((REPO / "clients/neovim/lua").rglob("protocol.lua"))
    assert lua_files, "Neovim has no protocol.lua"
    lua = set(re.findall(r'"(interpreter[./]\w+)"', lua_files[0].read_text()))
    assert server - ts == set(), f"missing in protocol.ts: {sorted(server - ts)}"
    assert server - lua == set(), f"missing in protocol.lua: {sorted(server - lua)}"
    assert ts - server == set() and lua - server == set(), (sorted(ts - server), sorted(lua - server))


# ---- field types, both ways: protocol.py's classes against protocol.ts's interfaces ------------------------
#
# A Python field `X | None = None` is left out when it has no value (to_wire): TypeScript `name?: X`. A field
# `X | None` without a default is sent as null: `name: X | null`. Anything else is required on both sides.

_TS = REPO / "clients" / "vscode" / "src" / "protocol.ts"


def _ts_source() -> str:
    return _TS.read_text(encoding="utf-8")


def _ts_aliases(source: str) -> dict[str, str]:
    import re

    found = re.finditer(r"^export type (\w+) =\s*(.*?);$", source, re.M | re.S)
    return {m.group(1): " ".join(m.group(2).split()) for m in found}


def _ts_interfaces(source: str) -> dict[str, dict[str, tuple[bool, str]]]:
    """interface name -> field -> (optional, type text), for fields written one to a line."""
    import re

    out: dict[str, dict[str, tuple[bool, str]]] = {}
    for match in re.finditer(r"^export interface (\w+)\b[^{]*\{(.*?)\n\}", source, re.S | re.M):
        fields = {}
        for field in re.finditer(r"^  (\w+)(\?)?: (.+);$", match.group(2), re.M):
            fields[field.group(1)] = (bool(field.group(2)), field.group(3).strip())
        out[match.group(1)] = fields
    return out


def _split_union(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += int(ch in "{<([") - int(ch in "}>)]")
        if ch == "|" and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    parts.append(current.strip())
    return [p for p in parts if p]


def _ts_kind(text: str, aliases: dict[str, str], interfaces: dict[str, Any]) -> Any:
    """A TypeScript type as a comparable shape: "string", "number", "boolean", "any", "object",
    ("literal", {...}), ("array", element), ("ref", name)."""
    text = text.strip()
    parts = _split_union(text)
    if len(parts) > 1:
        if all(p.startswith('"') for p in parts):
            return ("literal", frozenset(p.strip('"') for p in parts))
        if all(p.startswith("{") for p in parts):
            return "object"  # a union of object shapes (NotebookOutput)
        raise AssertionError(f"protocol.ts: a union the mirror test cannot read: {text}")
    if text in ("string", "number", "boolean"):
        return text
    if text == "unknown":
        return "any"
    if text.endswith("[]"):
        return ("array", _ts_kind(text[:-2].strip("()"), aliases, interfaces))
    if text.startswith("{") or text.startswith("Record<"):
        return "object"
    if text.startswith('"'):
        return ("literal", frozenset({text.strip('"')}))
    if text in interfaces:
        return ("ref", text)
    if text in aliases:
        return _ts_kind(aliases[text], aliases, interfaces)
    raise AssertionError(f"protocol.ts: unknown type {text!r}")


def _py_kind(tp: Any) -> Any:
    import types
    import typing

    import attrs

    origin = typing.get_origin(tp)
    if tp is str:
        return "string"
    if tp in (int, float):
        return "number"
    if tp is bool:
        return "boolean"
    if tp is Any:
        return "any"
    if origin is typing.Literal:
        return ("literal", frozenset(typing.get_args(tp)))
    if origin is list:
        return ("array", _py_kind(typing.get_args(tp)[0]))
    if origin is dict or tp is dict:
        return "object"
    if isinstance(tp, type) and attrs.has(tp):
        return ("ref", tp.__name__)
    if origin in (typing.Union, types.UnionType):
        raise AssertionError(f"a union protocol.py should not have: {tp}")
    raise AssertionError(f"protocol.py: a type the mirror test cannot read: {tp}")


def _compatible(py: Any, ts: Any) -> bool:
    if py == ts or py == "any":
        return True
    if py == "object" and isinstance(ts, tuple) and ts[0] == "ref":
        return True  # a dict in Python, a named shape (LspRange, RunSource, FileChange) in TypeScript
    if isinstance(py, tuple) and isinstance(ts, tuple) and py[0] == ts[0] == "array":
        return _compatible(py[1], ts[1])
    return False


def _py_fields(cls: type) -> dict[str, tuple[bool, bool, Any]]:
    """field (camelCase) -> (optional: left out when None, nullable: sent as null, kind)."""
    import types
    import typing

    import attrs

    from interpreter_lsp import protocol as p

    hints = typing.get_type_hints(cls, vars(p))
    out = {}
    for field in attrs.fields(cls):
        tp = hints[field.name]
        args = typing.get_args(tp)
        none = typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args
        if none:
            rest = [a for a in args if a is not type(None)]
            tp = rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]  # noqa: UP007
        optional = none and field.default is None
        out[_camel(field.name)] = (optional, none and not optional, _py_kind(tp))
    return out


def _mirrored_classes() -> list[type]:
    from interpreter_lsp import protocol as p

    classes: list[type] = [getattr(p, name) for name in _NOTIFICATION_PARAMS]
    classes += [p.ContextUse, p.LspPosition, p.Usage, p.KernelInfo, p.Variable]
    for args, result in p.COMMAND_SHAPES.values():
        classes += [c for c in (args, result) if c not in classes]
    classes += [c for c in p.HISTORY_EVENTS if c not in classes]
    return classes


def test_protocol_ts_mirrors_every_class_field_by_field_with_its_type() -> None:
    import attrs

    source = _ts_source()
    aliases, interfaces = _ts_aliases(source), _ts_interfaces(source)
    problems = []
    for cls in _mirrored_classes():
        name = cls.__name__
        if not attrs.fields(cls):
            # Nothing to mirror field by field: EmptyResult is a type, reset / undo are in the log only.
            if getattr(cls, "type", None) is None and name not in aliases and name not in interfaces:
                problems.append(f"{name}: not declared in protocol.ts")
            continue
        if name not in interfaces:
            problems.append(f"{name}: no interface in protocol.ts")
            continue
        client = dict(interfaces[name])
        kind = getattr(cls, "type", None)
        if isinstance(kind, str):  # a history event: its `type` is the literal
            if client.pop("type", None) != (False, f'"{kind}"'):
                problems.append(f"{name}: protocol.ts must declare type: {kind!r}")
        server = _py_fields(cls)
        for field in sorted(set(server) - set(client)):
            problems.append(f"{name}.{field}: only in protocol.py")
        for field in sorted(set(client) - set(server)):
            problems.append(f"{name}.{field}: only in protocol.ts")
        for field in sorted(set(server) & set(client)):
            optional, nullable, py = server[field]
            ts_optional, text = client[field]
            ts_nullable = text.endswith("| null")
            ts = _ts_kind(text.removesuffix("| null"), aliases, interfaces)
            if optional != ts_optional:
                problems.append(f"{name}.{field}: optional in {'protocol.py' if optional else 'protocol.ts'} only")
            if nullable != ts_nullable:
                problems.append(f"{name}.{field}: null allowed in {'protocol.py' if nullable else 'protocol.ts'} only")
            if not _compatible(py, ts):
                problems.append(f"{name}.{field}: protocol.py {py}, protocol.ts {ts}")
    assert problems == [], "\n".join(problems)


def test_protocol_ts_history_event_union_is_the_servers() -> None:
    import re

    from interpreter_lsp import protocol as p

    source = _ts_source()
    union = re.search(r"export type HistoryEvent = \{ ts\?: number \} & \((.*?)\);", source, re.S)
    assert union, "protocol.ts: HistoryEvent is not the union of named event interfaces"
    client = set(re.findall(r"\|\s*(\w+)", union.group(1)))
    # reset and undo are applied by interpreter.history: a client never receives them.
    server = {cls.__name__ for cls in p.HISTORY_EVENTS if cls.type not in ("reset", "undo")}
    assert client == server, (
        f"only in protocol.py {sorted(server - client)}, only in protocol.ts {sorted(client - server)}"
    )


def test_protocol_ts_literal_types_are_the_servers() -> None:
    import typing

    from interpreter_lsp import protocol as p

    aliases = _ts_aliases(_ts_source())
    for name in (
        "RiskLevel",
        "RunState",
        "TurnState",
        "OutputKind",
        "KernelState",
        "ProposalState",
        "Origin",
        "DecisionKind",
    ):
        server = frozenset(typing.get_args(getattr(p, name)))
        assert name in aliases, f"protocol.ts has no type {name}"
        client = _ts_kind(aliases[name], aliases, {})
        assert client == ("literal", server), f"{name}: protocol.py {sorted(server)}, protocol.ts {client}"


def test_every_command_has_declared_arguments_and_result_documented() -> None:
    """protocol.py declares each command's argument and result classes; docs/protocol.md's command table
    names every argument field."""
    import re

    import attrs

    from interpreter_lsp import protocol as p

    assert set(p.COMMAND_SHAPES) == set(p.ALL_COMMANDS)
    doc = (REPO / "docs" / "protocol.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(interpreter\.\w+)` \| (.*) \|$", doc, re.M))
    for command, (args, result) in p.COMMAND_SHAPES.items():
        assert command in rows, f"{command} is not in docs/protocol.md's command table"
        words = set(re.findall(r"[A-Za-z]+", rows[command]))
        for cls in (args, result):
            missing = {_camel(f.name) for f in attrs.fields(cls)} - words - {"uri"}
            if cls is p.StatusResult:
                continue  # the status result has its own section, checked below
            assert not missing, f"{command}: {cls.__name__} fields {sorted(missing)} are not documented"
    status = doc.split("`interpreter.status` result:", 1)[1].split("## Notifications", 1)[0]
    for field in attrs.fields(p.StatusResult):
        assert f'"{_camel(field.name)}"' in status, f"status field {_camel(field.name)} is not in the example"


def test_emacs_client_declares_and_uses_only_the_servers_names() -> None:
    import re

    from interpreter_lsp import protocol as p

    server = _names(p, "interpreter.") | _names(p, "interpreter/")
    el = (REPO / "clients" / "emacs" / "interpreter-lsp.el").read_text(encoding="utf-8")
    block = re.search(r"\(defconst interpreter-lsp-protocol-names\s+'\((.*?)\)\s*\"", el, re.S)
    assert block, "interpreter-lsp.el has no interpreter-lsp-protocol-names"
    declared = set(re.findall(r'"(interpreter[./]\w+)"', block.group(1)))
    assert declared == server, (
        f"only in protocol.py {sorted(server - declared)}, only in the .el {sorted(declared - server)}"
    )
    used = set(re.findall(r'"(interpreter\.\w+)"', el)) | set(re.findall(r"\(eql (interpreter/\w+)\)", el))
    assert used <= server, f"interpreter-lsp.el uses names the server does not have: {sorted(used - server)}"


# ---- the Neovim client's field table, both ways ------------------------------------------------------------


def _lua_type(kind: Any) -> str:
    if kind in ("string", "number", "boolean"):
        return kind
    if isinstance(kind, tuple) and kind[0] == "literal":
        return "string"
    return "any" if kind == "any" else "table"


def lua_fields_block() -> str:
    """The `M.FIELDS` table protocol.lua holds: every class of protocol.py that has fields, each field with
    its Lua type, `?` when the server may leave it out (or send null)."""
    lines = ["M.FIELDS = {"]
    for cls in _mirrored_classes():
        fields = _py_fields(cls)
        if not fields:
            continue
        parts = [
            f'{name} = "{_lua_type(kind)}{"?" if optional or nullable else ""}"'
            for name, (optional, nullable, kind) in fields.items()
        ]
        lines.append(f"  {cls.__name__} = {{ {', '.join(parts)} }},")
    lines.append("}")
    return "\n".join(lines) + "\n"


def test_neovim_protocol_lua_has_every_field_with_its_type() -> None:
    """protocol.lua's M.FIELDS is protocol.py's classes, field by field (names, Lua types, optionality), no
    more and no less. On a difference the message is the table to paste."""
    import re

    lua = (REPO / "clients" / "neovim" / "lua" / "interpreter_lsp" / "protocol.lua").read_text(encoding="utf-8")
    block = re.search(r"^M\.FIELDS = \{\n.*?^\}\n", lua, re.M | re.S)
    expected = lua_fields_block()
    assert block is not None and block.group(0) == expected, f"protocol.lua's M.FIELDS should be:\n{expected}"
