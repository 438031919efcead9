"""The risk rules as data: which commands matter, and how they are grouped.

The Python and shell scanners (safety/python/, safety/shell/) find *what* code does (deletes this path,
pipes a download into sh); places.py says how bad doing it to a path is; this module names the commands.
"""

from __future__ import annotations

from interpreter_lsp.safety.secrets import is_secret_name

# One definition of a secret (safety/secrets.py): the names the kernel's environment withholds are the
# ones whose value leaving the machine is an alarm (PGPASSWORD, DATABASE_URL, *_TOKEN, ...).
is_secret_variable = is_secret_name


PRIVILEGE_COMMANDS = frozenset({"sudo", "doas", "su", "pkexec", "runuser", "gosu", "run0"})
# Wrappers that run the rest of their arguments as a command.
WRAPPER_COMMANDS = frozenset(
    {"env", "nohup", "time", "nice", "ionice", "timeout", "stdbuf", "command", "builtin", "exec", "watch",
     "setsid", "chroot", "unbuffer", "caffeinate", "strace", "ltrace", "xargs", "parallel", "flock"}
)
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh", "lynx", "links"})
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "ash", "tcsh", "csh"})
# Wrappers that run the command as written, with nothing to hide: no reason of their own.
PLAIN_WRAPPERS = frozenset({"time", "command", "builtin", "exec", "stdbuf"})
# Commands that look a name up in DNS or reach a host: a secret in their arguments leaves the machine.
DNS_COMMANDS = frozenset({"nslookup", "dig", "host", "drill", "ping", "ping6", "traceroute", "tracepath", "mtr",
                          "getent", "whois", "resolvectl", "kdig", "delv"})
# API hosts a key is meant for: sending a key there in a header is using it, not leaking it (still medium).
KNOWN_API_HOSTS = ("api.openai.com", "api.anthropic.com", "api.github.com", "uploads.github.com",
                   "huggingface.co", "api.mistral.ai", "generativelanguage.googleapis.com", "api.groq.com",
                   "openrouter.ai", "api.together.xyz", "api.cohere.com", "api.cohere.ai", "api.deepseek.com",
                   "api.x.ai", "gitlab.com", "registry.npmjs.org", "upload.pypi.org", "api.fireworks.ai")
# Process names so common that killing them all by name hits the user's other work (or this server).
BROAD_PROCESS_NAMES = frozenset({"python", "python2", "python3", "node", "bash", "sh", "zsh", "fish", "java", "ssh",
                                 "sshd", "systemd", "init", "Xorg", "gnome-shell", "code", "sudo", "dockerd",
                                 "containerd", "postgres", "mysqld", "ipykernel", "jupyter", "kernel", "chrome",
                                 "firefox", "interpreter-lsp", "nvim", "vim", "tmux", "screen", "login", "dbus-daemon"})
SCHEDULERS = frozenset({"at", "batch"})
SCRIPT_INTERPRETERS = frozenset({"python", "python2", "python3", "pypy", "pypy3", "perl", "ruby", "node",
                                 "nodejs", "php", "lua", "Rscript", "pwsh", "deno", "bun", "osascript"})
DECODERS = frozenset({"base64", "base32", "xxd", "openssl", "uudecode", "gunzip", "zcat", "rev", "tr"})
NETWORK_SENDERS = frozenset(
    {"curl", "wget", "nc", "ncat", "netcat", "socat", "telnet", "ssh", "scp", "sftp", "ftp", "rsync",
     "mail", "sendmail", "mutt", "http", "https", "xh", "openssl"}
)
NETWORK_COMMANDS = NETWORK_SENDERS | DOWNLOADERS | DNS_COMMANDS
ENV_DUMPERS = frozenset({"env", "printenv", "set", "export", "declare", "compgen"})
READERS = frozenset(
    {"cat", "tac", "less", "more", "head", "tail", "bat", "batcat", "strings", "xxd", "hexdump", "od",
     "base64", "grep", "egrep", "fgrep", "rg", "ag", "awk", "sed", "sort", "uniq", "cut", "nl", "view",
     "vim", "vi", "nano", "cp", "scp", "rsync", "tar", "zip", "7z", "gzip", "bzip2", "xz", "sqlite3",
     "jq", "yq", "openssl", "gpg", "diff", "cmp", "md5sum", "sha256sum", "dd", "nc", "ncat", "curl",
     "python", "python3", "source", "."}
)
# Commands that only print a file's content (the output reaches the model).
SHOWERS = frozenset({"cat", "tac", "less", "more", "head", "tail", "bat", "batcat", "strings", "xxd",
                     "hexdump", "od", "base64", "grep", "egrep", "fgrep", "rg", "awk", "nl", "jq", "yq",
                     "sort", "cut", "source", "."})
PACKAGE_MANAGERS: dict[str, frozenset[str]] = {
    # command -> the subcommands that install
    "pip": frozenset({"install", "download"}),
    "pip3": frozenset({"install", "download"}),
    "pipx": frozenset({"install", "run", "inject"}),
    "uv": frozenset({"add", "install", "pip", "tool", "run"}),
    "poetry": frozenset({"add", "install"}),
    "pdm": frozenset({"add", "install"}),
    "conda": frozenset({"install", "create", "env"}),
    "mamba": frozenset({"install", "create"}),
    "micromamba": frozenset({"install", "create"}),
    "npm": frozenset({"install", "i", "add", "exec", "ci"}),
    "npx": frozenset({"*"}),
    "yarn": frozenset({"add", "install", "global", "dlx"}),
    "pnpm": frozenset({"add", "install", "i", "dlx"}),
    "bun": frozenset({"add", "install", "i", "x"}),
    "apt": frozenset({"install", "reinstall"}),
    "apt-get": frozenset({"install", "reinstall"}),
    "yum": frozenset({"install"}),
    "dnf": frozenset({"install"}),
    "apk": frozenset({"add"}),
    "pacman": frozenset({"-S", "-U", "-Sy", "-Syu"}),
    "zypper": frozenset({"install", "in"}),
    "brew": frozenset({"install", "tap"}),
    "port": frozenset({"install"}),
    "gem": frozenset({"install"}),
    "cargo": frozenset({"install"}),
    "go": frozenset({"install", "get"}),
    "dotnet": frozenset({"tool"}),
    "snap": frozenset({"install"}),
    "flatpak": frozenset({"install"}),
}
PACKAGE_REMOVE_SUBCOMMANDS = frozenset({"uninstall", "remove", "purge", "autoremove", "erase", "rm"})
OFFICIAL_INDEX_HOSTS = ("pypi.org", "files.pythonhosted.org", "download.pytorch.org", "registry.npmjs.org",
                        "127.0.0.1", "localhost")
POWER_COMMANDS = frozenset({"shutdown", "reboot", "halt", "poweroff", "telinit", "kexec"})
SYSTEMCTL_POWER = frozenset({"reboot", "poweroff", "halt", "kexec", "suspend", "hibernate", "emergency",
                             "rescue", "isolate", "default"})
ACCOUNT_COMMANDS = frozenset({"useradd", "userdel", "usermod", "adduser", "deluser", "passwd", "chpasswd",
                              "groupadd", "groupdel", "gpasswd", "visudo", "chsh", "vipw"})
KERNEL_MODULE_COMMANDS = frozenset({"insmod", "rmmod", "modprobe", "sysctl"})
DISK_COMMANDS = frozenset({"mkfs", "mke2fs", "mkswap", "wipefs", "fdisk", "sfdisk", "gdisk", "sgdisk",
                           "cfdisk", "parted", "blkdiscard", "hdparm", "mkntfs", "mkdosfs", "badblocks",
                           "cryptsetup", "lvremove", "vgremove", "pvremove", "zpool", "dmsetup"})
FIREWALL_COMMANDS = frozenset({"iptables", "ip6tables", "nft", "ufw", "firewall-cmd", "iptables-legacy"})
KILL_BY_NAME = frozenset({"killall", "pkill", "killall5", "skill", "slay"})
SECRET_WORDS = ("password", "passwd", "secret", "token", "api_key", "apikey", "api-key", "private key",
                "aws_access", "aws_secret", "credential", "begin rsa", "begin openssh")
CLOUD_DESTROY: tuple[tuple[tuple[str, ...], str], ...] = (
    (("terraform", "destroy"), "destroys cloud infrastructure (terraform destroy)"),
    (("aws", "s3", "rb"), "deletes a cloud storage bucket"),
    (("aws", "ec2", "terminate-instances"), "terminates cloud machines"),
    (("aws", "rds", "delete-db-instance"), "deletes a cloud database"),
    (("kubectl", "delete", "namespace"), "deletes a Kubernetes namespace and everything in it"),
    (("kubectl", "delete", "ns"), "deletes a Kubernetes namespace and everything in it"),
    (("gcloud", "projects", "delete"), "deletes a cloud project"),
    (("az", "group", "delete"), "deletes a cloud resource group"),
    (("heroku", "apps:destroy"), "deletes a Heroku app"),
)
