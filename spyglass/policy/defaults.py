"""What a deployment gets with no policy file: safe and useful defaults.

Paths starting with ``~`` are expanded against the home directory of the run
(the agent's ``HOME``), never the home of whoever replays the run later.
"""

from __future__ import annotations

from typing import Final

#: secret paths every policy starts from (``policy.secrets`` adds to them)
SECRET_GLOBS: Final = (
    "~/.ssh/**",
    "~/.aws/**",
    "~/.config/gcloud/**",
    "~/.azure/**",
    "~/.kube/config",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.gnupg/**",
    "~/.pypirc",
    "~/.npmrc",
    "~/.config/gh/hosts.yml",
    "~/.vault-token",
    "**/.env",
    "**/.env.*",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/sudoers.d/**",
    "/etc/ssh/ssh_host_*_key",
    # browser profiles
    "~/.mozilla/firefox/**",
    "~/.config/google-chrome/**",
    "~/.config/chromium/**",
    "~/.config/BraveSoftware/**",
    "~/.config/microsoft-edge/**",
    # keyrings and password stores
    "~/.local/share/keyrings/**",
    "~/.password-store/**",
    "~/.config/op/**",
    # shell and REPL histories
    "~/.bash_history",
    "~/.zsh_history",
    "~/.zhistory",
    "~/.histfile",
    "~/.local/share/fish/fish_history",
    "~/.python_history",
    "~/.node_repl_history",
    "~/.psql_history",
    "~/.mysql_history",
    "~/.sqlite_history",
    "~/.lesshst",
)

#: never secret even though a secret glob covers them (public halves, client state)
SECRET_EXCEPTIONS: Final = (
    "~/.ssh/*.pub",
    "~/.ssh/known_hosts",
    "~/.ssh/known_hosts.old",
    "**/.env.example",
    "**/.env.sample",
    "**/.env.template",
)

#: directories programs are normally run from; the workspace's virtualenvs and
#: node_modules/.bin are added per run
TRUSTED_EXEC: Final = (
    "/usr/bin",
    "/bin",
    "/usr/sbin",
    "/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/usr/lib",
    "/usr/lib64",
    "/usr/libexec",
    "/usr/local/lib",
    "/usr/share",
    "/lib",
    "/lib64",
    "/opt",
    "/snap/bin",
    "/nix/store",
    "~/.local/bin",
    "~/.local/share/uv",
    "~/.local/pipx",
    "~/.cargo/bin",
    "~/.rustup",
    "~/.nvm",
    "~/.volta",
    "~/.pyenv",
    "~/.rye",
    "~/go/bin",
    "~/.bun/bin",
    "~/.deno/bin",
)

#: relative to each workspace root: where a project's own tools live
WORKSPACE_TRUSTED_EXEC: Final = (
    ".venv/bin",
    "venv/bin",
    "env/bin",
    ".tox/**/bin",
    ".nox/**/bin",
    "**/node_modules/.bin",
    "**/node_modules/**/bin",
)

#: places a run may write to without it being "outside the workspace"
WRITABLE_TEMP: Final = (
    "/tmp",
    "/var/tmp",
    "/dev/shm",
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/pts",
    "/dev/ptmx",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/fd",
    "/proc/self",
    "/proc/thread-self",
    "/run/user",
    "/var/cache/private",
    "~/.cache",
    "~/.npm",
    "~/.local/state",
    "~/.local/share/virtualenv",
    "~/.local/share/uv",
    "~/.local/share/pnpm",
    "~/.yarn",
    "~/.pnpm-store",
    "~/.gradle/caches",
    "~/.m2/repository",
    "~/.cargo/registry",
    "~/.cargo/git",
    "~/go/pkg",
    "~/.rustup",
    "~/.pylint.d",
    "~/.mypy_cache",
    "~/.ipython",
    "~/.jupyter/runtime",
    "~/.config/matplotlib",
    "~/.codex/sessions",
    "~/.codex/log",
    "~/.claude/projects",
    "~/.claude/todos",
    "~/.claude/statsig",
    "~/.claude/shell-snapshots",
)

#: hosts any run may reach unless the policy turns the built-in list off
#: (``network.builtin_allow: false``): loopback, model APIs, package indexes, code hosts
ALLOWED_HOSTS: Final = (
    "localhost",
    "127.0.0.0/8",
    "::1",
    "*.openai.com",
    "openai.com",
    "chatgpt.com",
    "*.chatgpt.com",
    "*.anthropic.com",
    "anthropic.com",
    "*.googleapis.com",
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "proxy.golang.org",
    "sum.golang.org",
    "crates.io",
    "static.crates.io",
    "index.crates.io",
    "github.com",
    "*.github.com",
    "*.githubusercontent.com",
    "deb.debian.org",
    "security.debian.org",
)

#: workspace paths left out of the before/after manifests (caches the tools themselves write)
DEFAULT_MANIFEST_EXCLUDE: Final = (
    ".git/objects/**",
    "**/__pycache__/**",
    "**/.pytest_cache/**",
    "**/.mypy_cache/**",
    "**/.ruff_cache/**",
    "**/node_modules/**",
    ".spyglass/**",
)
#: command lines recognised as test runs (evidence.test_patterns replaces this list)
DEFAULT_TEST_PATTERNS: Final = (
    "pytest",
    "py.test",
    "python -m pytest",
    "python -m unittest",
    "npm test",
    "npm run test",
    "yarn test",
    "pnpm test",
    "go test",
    "cargo test",
    "make test",
    "make check",
    "tox",
    "nox",
    "mvn test",
    "gradle test",
    "ctest",
)

#: what `spyglass gate` requires when neither --require nor the policy's `gate:` says
DEFAULT_GATE: Final = (
    "evidence-verified",
    "tests-passed-after-last-edit",
    "no-alerts-at-or-above=high",
)
