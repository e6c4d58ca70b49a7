"""``import spyglass``: msgspec loaded without ``typing_extensions`` (spyglass/__init__.py), and
msgspec still doing what spyglass asks of it then."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

_PROBE = r"""
import json, sys
{first}
import msgspec
from typing import NotRequired, Optional, TypedDict

class Rec(msgspec.Struct, kw_only=True):
    name: str
    size: Optional[int] = None
    tags: list[str] = []

class TD(TypedDict):
    a: int
    b: NotRequired[str]

rec = msgspec.json.decode(b'{"name": "x", "size": 3, "tags": ["a"]}', type=Rec)
td = msgspec.json.decode(b'{"a": 1}', type=TD)
try:
    msgspec.json.decode(b'{"b": "y"}', type=TD)
    refused = False
except msgspec.ValidationError:
    refused = True
print(json.dumps({"loaded": sorted(m for m in ("typing_extensions", "inspect", "ast") if m in sys.modules),
                  "rec": msgspec.to_builtins(rec), "td": td, "refused": refused}))
import typing_extensions  # anything asking later still gets it
print(json.dumps({"later": typing_extensions.__name__}))
"""


def _probe(first: str) -> list[dict[str, object]]:
    out = subprocess.run([sys.executable, "-c", _PROBE.replace("{first}", first)], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def test_msgspec_after_spyglass_loads_no_typing_extensions_and_decodes_the_same() -> None:
    lean, later = _probe("import spyglass")
    plain, _ = _probe("")
    assert lean["loaded"] == []
    assert plain["loaded"] == ["ast", "inspect", "typing_extensions"]  # the control: what it saves
    for key in ("rec", "td", "refused"):
        assert lean[key] == plain[key]
    assert lean["rec"] == {"name": "x", "size": 3, "tags": ["a"]}
    assert lean["refused"] is True  # NotRequired/required keys still understood
    assert later == {"later": "typing_extensions"}


def test_the_finder_refuses_typing_extensions_to_nothing_else() -> None:
    code = ("import spyglass, sys\n"
            "import typing_extensions\n"
            "import msgspec\n"
            "print('inspect' in sys.modules, msgspec._utils._get_type_hints.__module__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "typing_extensions"]  # loaded first by someone else: msgspec uses it as always
