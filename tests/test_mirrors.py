"""The contract in one place, its mirrors checked: the settings schema against docs/configuration.md, VS
Code's package.json and Neovim's known_settings; protocol.py against the clients' protocol files."""

from __future__ import annotations

from pathlib import Path

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
