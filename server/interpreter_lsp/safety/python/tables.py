"""The Python rules as data: which functions run commands, delete, copy, read the network, decode, print;
which magics hold shell and which hold Python; where data comes from (its origins).
"""

from __future__ import annotations

# Where data comes from.
NET = "network"
ENCODED = "encoded"
ENV = "environment"
SECRET = "secret"  # read from a credential file
DOTENV = "dotenv"
PROCESSES = "processes"  # psutil.process_iter()

COMMAND_RUNNERS = frozenset(
    {"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
     "subprocess.Popen", "subprocess.getoutput", "subprocess.getstatusoutput", "os.system", "os.popen",
     "asyncio.create_subprocess_shell", "asyncio.create_subprocess_exec", "pty.spawn", "commands.getoutput",
     "os.posix_spawn", "os.posix_spawnp", "sh.Command", "invoke.run", "fabric.Connection.run"}
)
EXEC_PREFIXES = ("os.exec", "os.spawn")
# Method names that run a shell command whatever object they are called on (get_ipython().system ...).
COMMAND_METHODS = frozenset({"system", "popen", "getoutput", "getstatusoutput", "system_raw", "system_piped"})
NETWORK_SOURCES = ("requests.", "httpx.", "urllib.request.urlopen", "urllib2.urlopen", "urllib.urlopen",
                    "aiohttp.", "http.client.", "urllib3.", "pycurl.", "wget.download", "socket.", "dns.")
NETWORK_SINK_METHODS = frozenset({"post", "put", "patch", "request", "send", "sendall", "sendto", "sendmail",
                                   "send_message", "upload_file", "upload_fileobj", "urlopen", "storbinary",
                                   "get", "stream", "connect", "write"})
DECODERS = frozenset(
    {"base64.b64decode", "base64.decodebytes", "base64.b32decode", "base64.b16decode", "base64.a85decode",
     "base64.b85decode", "base64.urlsafe_b64decode", "base64.standard_b64decode", "codecs.decode",
     "zlib.decompress", "bz2.decompress", "lzma.decompress", "gzip.decompress", "binascii.unhexlify",
     "binascii.a2b_base64", "binascii.a2b_hex", "bytes.fromhex", "marshal.loads", "bytearray.fromhex"}
)
UNPICKLERS = frozenset({"pickle.loads", "pickle.load", "dill.loads", "dill.load", "cloudpickle.loads",
                         "marshal.loads", "joblib.load", "torch.load", "shelve.open", "yaml.unsafe_load",
                         "pandas.read_pickle", "pd.read_pickle", "numpy.load", "np.load"})
DELETE_SINGLE = frozenset({"os.remove", "os.unlink", "os.rmdir"})
DELETE_TREE = frozenset({"shutil.rmtree", "os.removedirs", "send2trash.send2trash"})
COPIERS = frozenset({"shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "shutil.copyfileobj",
                      "os.link", "os.symlink"})
MOVERS = frozenset({"shutil.move", "os.rename", "os.replace", "os.renames"})
CHMOD = frozenset({"os.chmod", "os.lchmod", "os.fchmod"})
CHOWN = frozenset({"os.chown", "os.lchown", "shutil.chown", "os.fchown"})
READ_OPENERS = frozenset({"sqlite3.connect", "configparser.ConfigParser.read", "dotenv.dotenv_values",
                           "json.load", "tomllib.load", "yaml.safe_load", "netrc.netrc", "io.open",
                           "codecs.open"})
PRINTERS = frozenset({"print", "pprint.pprint", "pprint.pp", "display", "IPython.display.display",
                       "sys.stdout.write", "sys.stderr.write", "logging.info", "logging.warning"})
INTERACTIVE_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "/bin/sh", "/bin/bash", "/bin/zsh",
                                 "/usr/bin/sh", "/usr/bin/bash", "cmd.exe", "powershell"})
# Cell magics whose body is shell, and ones whose body is still Python.
SHELL_CELL_MAGICS = frozenset({"bash", "sh", "script", "system", "!"})
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "python", "python3", "debug", "ipython",
                                 "py", "pypy"})
HARMLESS_CELL_MAGICS = frozenset({"html", "markdown", "latex", "svg", "md"})

# Modules whose functions, looked up by a computed name, could be anything from system() to rmtree().
SENSITIVE_MODULES = frozenset({"os", "subprocess", "shutil", "builtins", "__builtins__", "sys", "importlib",
                                "ctypes", "pty", "socket", "posix", "nt", "pathlib"})
BUILTIN_NAMES = frozenset({"open", "exec", "eval", "compile", "__import__", "getattr", "print", "dict", "str",
                            "display", "execfile"})

# A secret environment variable read by name: "secret-env:OPENAI_API_KEY" (an origin, like NET).
SECRET_ENV_PREFIX = "secret-env:"
# Keyword arguments of network calls that carry credentials to the host, rather than data to anywhere.
CREDENTIAL_KEYWORDS = frozenset({"headers", "auth", "cookies"})

# get_ipython() and what it returns: the shell that runs magics, aliases and system commands.
GET_IPYTHON = frozenset({"get_ipython", "IPython.get_ipython", "IPython.core.getipython.get_ipython"})
IPYTHON_SHELL = "IPython.shell"
# IPython's default aliases on Linux: `%rm -rf x` is `rm -rf x`.
IPYTHON_ALIASES = frozenset({"cat", "cp", "ldir", "lf", "lk", "ll", "ls", "lx", "mkdir", "mv", "rm", "rmdir",
                             "clear", "less", "man", "more"})
# Line magics that run nothing from outside the cell (their argument, if any, is Python or a setting).
QUIET_LINE_MAGICS = frozenset({"matplotlib", "who", "whos", "who_ls", "pwd", "lsmagic", "magic", "history", "hist",
                               "precision", "pdb", "xmode", "reload_ext", "unload_ext", "autoreload", "aimport",
                               "reset", "reset_selective", "page", "pinfo", "pinfo2", "pdef", "pdoc", "psource",
                               "doctest_mode", "tb", "colors", "automagic", "autocall", "config", "quickref",
                               "dhist", "dirs", "bookmark", "popd", "set_env", "notebook", "logstart", "logstop",
                               "logon", "logoff", "logstate", "killbgscripts", "unalias", "pylab", "autoawait",
                               "gui", "xdel", "store", "alias_magic", "rehashx", "pushd", "env", "load_ext"})
# Line magics whose argument is a Python statement.
PYTHON_LINE_MAGICS = frozenset({"time", "timeit", "prun", "debug"})

# Functions that, handed over as a value (a Thread target, functools.partial, map), run or delete something.
SENSITIVE_CALLABLES = (COMMAND_RUNNERS | DELETE_SINGLE | DELETE_TREE | MOVERS | CHMOD | CHOWN
                       | frozenset({"exec", "eval", "builtins.exec", "builtins.eval", "os.kill", "os.killpg",
                                    "runpy.run_path", "runpy.run_module", "__import__", "builtins.__import__",
                                    "importlib.import_module", "shutil.unpack_archive"}))
# Calls that apply a function they are handed to each element of an iterable.
MAPPERS = frozenset({"map", "imap", "imap_unordered", "starmap", "filter"})
# Internals through which any function can be reached by name.
DUNDER_LOOKUPS = frozenset({"__dict__", "__globals__", "__subclasses__", "__getattribute__", "__builtins__",
                            "__code__", "__closure__", "__loader__", "__mro__", "__bases__"})
