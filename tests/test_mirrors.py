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
