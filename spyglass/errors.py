"""Errors: one root, each carrying what the user needs to act on it.

Exit codes that spyglass itself uses (the agent's own code passes through
``run`` unchanged; 128+N means the agent died of signal N):

====  =====================================================================
code  meaning
====  =====================================================================
0     success
1     the command ran but found something (``gate`` failed, ``verify``
      found tampering is 3, see below)
2     usage error (bad flag, missing argument), bad input (rule, policy), or a
      path that cannot be read or written (missing directory, no permission)
3     evidence tampered (``verify``)
4     run incomplete: no final checkpoint (``verify``)
5     spyglass could not run the agent (backend or sandbox unavailable)
6     ``--fail-on``: an alert at or above the given level fired
7     enforcement: a ``kill`` rule stopped the agent
8     evidence incomplete: the store could not save everything (disk full,
      run directory deleted); the run is marked ``evidence-incomplete``
127   ``run``: the command was not found (recorded as a failed run)
====  =====================================================================
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_TAMPERED = 3
EXIT_INCOMPLETE = 4
EXIT_CANNOT_RUN = 5
EXIT_ALERT = 6
EXIT_KILLED = 7
EXIT_EVIDENCE = 8
EXIT_NOT_FOUND = 127


class SpyglassError(Exception):
    """Root of every error spyglass raises on purpose; the CLI prints it in one line."""

    exit_code: int = EXIT_USAGE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(SpyglassError):
    exit_code = EXIT_USAGE


class MissingToolError(SpyglassError):
    """A program spyglass needs is not installed; the hint names the package."""

    exit_code = EXIT_CANNOT_RUN

    def __init__(self, tool: str, package: str, why: str = "") -> None:
        msg = f"{tool} is not installed{': ' + why if why else ''}"
        super().__init__(msg, hint=f"install it: sudo apt-get install {package}")
        self.tool = tool
        self.package = package


class CaptureError(SpyglassError):
    exit_code = EXIT_CANNOT_RUN


class SandboxError(SpyglassError):
    """Confinement was asked for and cannot be built: spyglass refuses to run."""

    exit_code = EXIT_CANNOT_RUN


class StoreError(SpyglassError):
    exit_code = EXIT_USAGE


class StoreWriteError(StoreError):
    """The store cannot be written (disk full, read-only, gone): one line with the cause and the path."""

    exit_code = EXIT_EVIDENCE


class RunNotFound(StoreError):
    pass


#: what to do about a file-system error, by errno name
_PATH_REMEDY = {
    "ENOENT": "create the directory first, or choose another path",
    "ENOTDIR": "a part of the path is a file, not a directory: choose another path",
    "EEXIST": "something is in the way: choose another path",
    "EISDIR": "the path is a directory: name a file in it",
    "EACCES": "choose a path you may write to, or change its permissions",
    "EPERM": "choose a path you may write to, or change its permissions",
    "EROFS": "the file system is read-only: choose a path on a writable one",
    "ENOSPC": "the disk is full: free space or choose another path",
    "EDQUOT": "the disk quota is used up: free space or choose another path",
}


class PathError(SpyglassError):
    """A file or directory the user named cannot be read or written."""

    exit_code = EXIT_USAGE

    @classmethod
    def from_os_error(cls, exc: OSError, path: object | None = None, what: str = "") -> PathError:
        import errno as _errno

        name = _errno.errorcode.get(exc.errno or 0, "")
        where = path if path is not None else (exc.filename if exc.filename is not None else "?")
        reason = exc.strerror or str(exc)
        head = f"{what} {where}" if what else str(where)
        return cls(f"{head}: {reason}", hint=_PATH_REMEDY.get(name))


class SourceError(SpyglassError):
    """An error in a user file (rule, policy, events) with its location."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, path: str, line: int | None = None, col: int | None = None) -> None:
        self.path, self.line, self.col = path, line, col
        super().__init__(message)

    @property
    def where(self) -> str:
        loc = self.path
        if self.line is not None:
            loc += f":{self.line}"
            if self.col is not None:
                loc += f":{self.col}"
        return loc

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"
