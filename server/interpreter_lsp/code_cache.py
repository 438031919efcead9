"""The code objects attrs and cattrs compile while the server runs, kept between starts in the user's cache
directory (`cache_file()`): what Python's `__pycache__` does for modules, for the code they generate.

lsprotocol defines ~550 attrs classes; attrs writes each class's methods as source text and compiles it when
the class is made, at import: ~200 ms of compile() on this kind of machine, ~40 % of the server's CPU from
spawn to `initialize` (microsoft/lsprotocol#441; a bare pygls server pays it too). cattrs does the same for
each message type's structure and unstructure functions, the first time one passes (~30 ms over a session).
The same source, file name, mode and compiler flags always compile to the same code object, so a code object
is cached under a hash of exactly those (the flags are the caller's own: compile() inherits its module's
`from __future__` flags, which this wrapper passes on explicitly); anything else (an AST, explicit
optimisation levels, bytes) is compiled as before, uncached.

`install()` (the server's entry point, before pygls and lsprotocol are imported) loads the file and puts the
caching compile in the modules' globals (`attr._make`, `cattrs.gen`, `cattrs.gen.typeddicts`: they call the
builtin by name), for the process's life. `save()` (at the end of a first start's imports, and at exit when
there is news) writes it atomically. The file is executable code for the server: it is read only from a
directory and file that the user owns and that nobody else can write (as Python's own caches are trusted),
never larger than MAX_BYTES; a file that is unreadable, corrupt, of another Python or of another shape is
ignored and written again. Nothing here can stop the server: any failure means compiling as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import marshal
import os
import stat
import sys
import tempfile
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import userdirs

log = logging.getLogger(__name__)

# Modules whose generated code is cached: each calls the builtin compile() by its global name.
MODULES = ("attr._make", "cattrs.gen", "cattrs.gen.typeddicts")
# One file per Python: marshal's format and the bytecode are Python's own.
FILE_NAME = f"generated-code.{sys.implementation.cache_tag}.marshal"
MAX_BYTES = 32 * 1024 * 1024  # a larger file is not read (this server writes ~2 MB)
MAX_ENTRIES = 8_000  # past this many (old versions' code piling up), a save keeps only what this process used
# A save waits for this many misses: a few sources differ in every process (attrs writes the hash of a
# class's generated file name, which Python salts per process, into a frozen class's __hash__), and a start
# must not write the whole file again for them. A first start misses ~600, a first session's messages ~100.
SAVE_AFTER = 8
_FORMAT = importlib.util.MAGIC_NUMBER + b"interpreter-lsp code cache 1"
# The flags compile() inherits from its caller (CPython's PyCF_MASK): every `from __future__` feature's but
# nested_scopes' (CO_NESTED, a code object's own flag, obsolete as a compiler flag) and generators' (none).
_FUTURE_FLAGS = 0
for _name in __import__("__future__").all_feature_names:
    if _name not in ("nested_scopes", "generators"):
        _FUTURE_FLAGS |= getattr(__import__("__future__"), _name).compiler_flag

_builtin_compile = compile
# Loaded from the file, each code object still marshalled: it is made at its first use, and its bytes are then
# dropped (the ~40 % never used in a session cost their bytes only, not their objects: ~1.5 MB less RSS).
_cached: dict[bytes, bytes] = {}
_used: dict[bytes, types.CodeType] = {}  # asked for in this process (hits and misses)
_new = 0  # misses since the last save
_compiled = 0  # misses in all
_hits = 0
_file: Path | None = None


def cache_file(environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where the cache lives: the user's cache directory (XDG_CACHE_HOME, else ~/.cache). None without an
    absolute place for it (a relative XDG_CACHE_HOME is invalid, as the XDG specification says; a home that
    cannot be found would make `~` a directory of the working directory, which may be a workspace)."""
    base = userdirs.base("XDG_CACHE_HOME", ".cache", environ)
    if base is None:
        return None
    return base / "interpreter-lsp" / FILE_NAME


def _key(source: str, filename: str, mode: str, flags: int) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{mode}\0{flags}\0{filename}\0".encode("utf-8", "surrogatepass"))
    digest.update(source.encode("utf-8", "surrogatepass"))
    return digest.digest()


def _compile(
    source: Any,
    filename: Any,
    mode: str,
    flags: int = 0,
    dont_inherit: bool = False,
    optimize: int = -1,
    **kwargs: Any,
) -> Any:
    """compile(), as the calling module would have called it, from the cache when it can."""
    global _new, _hits, _compiled
    if not dont_inherit:  # what compile() inherits: the caller's `from __future__` flags
        flags |= sys._getframe(1).f_code.co_flags & _FUTURE_FLAGS
    if not isinstance(source, str) or not isinstance(filename, str) or optimize != -1 or kwargs:
        return _builtin_compile(source, filename, mode, flags, True, optimize, **kwargs)
    key = _key(source, filename, mode, flags)
    code = _used.get(key) or _loaded(_cached.pop(key, None))  # asked again: the same (immutable) object
    if code is not None:
        _hits += 1
    else:
        code = _builtin_compile(source, filename, mode, flags, True)
        if type(code) is not types.CodeType:  # an AST (flags asked for one): not kept
            return code
        _new += 1
        _compiled += 1
    _used[key] = code
    return code


def _loaded(blob: bytes | None) -> types.CodeType | None:
    if blob is None:
        return None
    try:
        code = marshal.loads(blob)
    except (EOFError, ValueError, TypeError):
        return None
    return code if type(code) is types.CodeType else None


def _trusted(path: Path, *, directory: bool) -> bool:
    """The user's own, and writable by nobody else (POSIX; elsewhere the user's profile protects it). The
    file itself is no symbolic link and has no other name (either could be written elsewhere: a link into
    a workspace); the directory may be reached through links (a cache directory on another disk)."""
    try:
        st = path.stat() if directory else path.lstat()
    except OSError:
        return False
    if not (stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode) and st.st_nlink == 1):
        return False
    if not hasattr(os, "geteuid"):  # Windows: no owner or mode bits of this kind to check
        return True
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _load(path: Path) -> dict[bytes, bytes]:
    if not (_trusted(path.parent, directory=True) and _trusted(path, directory=False)):
        return {}
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            log.debug("generated-code cache %s is over %d bytes: not read", path, MAX_BYTES)
            return {}
        head, entries = marshal.loads(data)
    except (OSError, EOFError, ValueError, TypeError) as exc:
        log.debug("generated-code cache %s unreadable (%s): compiled anew", path, exc)
        return {}
    if head != _FORMAT or not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if type(k) is bytes and type(v) is bytes}


def install() -> None:
    """Load the cache and route the generating modules' compile() through it (idempotent)."""
    global _file, _cached
    if _file is not None:
        return
    _file = cache_file()
    if _file is None:
        return
    _cached = _load(_file)
    for name in MODULES:
        with contextlib.suppress(ImportError):  # a cattrs without that module: nothing of it to cache
            importlib.import_module(name).compile = _compile


def save() -> None:
    """Write the cache if this process compiled SAVE_AFTER or more code objects it did not hold (atomically:
    a new file renamed over the old one, so a reader never sees half of it)."""
    global _new
    log.debug("generated code: %d code objects from the cache %s, %d compiled", _hits, _file, _compiled)
    if _file is None or _new < SAVE_AFTER:
        return
    used = {key: marshal.dumps(code) for key, code in _used.items()}
    entries = {**_load(_file), **used}  # read again: what other servers added meanwhile is kept
    if len(entries) > MAX_ENTRIES:
        entries = used
    directory = _file.parent
    tmp = None
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _trusted(directory, directory=True):
            log.debug("generated-code cache directory %s is not the user's own: not written", directory)
            return
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".generated-code.", suffix=".tmp")  # mode 0600
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps((_FORMAT, entries)))
        os.replace(tmp, _file)
        tmp = None
        _new = 0
    except (OSError, ValueError) as exc:
        log.debug("generated-code cache %s not written: %s", _file, exc)
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def stats() -> dict[str, int]:
    """Code objects taken from the cache, compiled and not yet saved, and held still unused (for tests)."""
    return {"hits": _hits, "new": _new, "held": len(_cached)}
