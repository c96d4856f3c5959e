"""The text of a Lua script as Redis runs it: its includes expanded, and the shared functions
it never calls left out.

Redis runs a script's whole body on every call, so each ``local function`` of an include
becomes a new closure per call, used or not; a hot script (a worker's outcome, a claim) pulls
in thirty of them through a few includes. Leaving out the ones nothing reaches keeps the
includes general at no cost per call.

Includes define their functions at the start of a line (``local function name(``) and close
them with ``end`` alone on a line: the convention :func:`prune` relies on. A function is kept
when the script's own code, or a kept function, names it outside a comment.

On Redis 7.0 and later a script runs as a function instead (:func:`library`): its includes'
functions are made once, when the library loads, and only its body runs per call.
"""

from __future__ import annotations

import re
from importlib import resources

_INCLUDE = re.compile(r"^-- @include (\w+)\s*$", re.MULTILINE)
_FUNCTION = re.compile(r"^local function (\w+)\(.*?^end$\n?", re.MULTILINE | re.DOTALL)
_WORD = re.compile(r"\w+")
# Comments (which name functions freely); no script writes '--' inside a string.
_COMMENT = re.compile(r"--\[\[.*?\]\]|--[^\n]*", re.DOTALL)
# A value an include keeps for the length of one call (a cache, say): a lower-case top-level
# local, set on its one line. Upper-case ones are constants, which no call changes
# (tests/scripts/test_source.py checks): a function's top level runs once, at load.
_PER_CALL = re.compile(r"^local ([a-z_]\w*) = (.+)$", re.MULTILINE)
_BODY = "\n-- (the script's body)\n"


def read(relative: str) -> str:
    """The text of ``relative`` (a script or ``includes/<name>.lua``) in this package."""
    return resources.files(__package__).joinpath(relative).read_text(encoding="utf-8")


def expand(source: str, seen: set[str] | None = None) -> str:
    """``source`` with each ``-- @include <name>`` replaced by that include (expanded in
    turn), each include once."""
    done = set() if seen is None else seen

    def include(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in done:
            return f"-- ({name} included above)"
        done.add(name)
        return expand(read(f"includes/{name}.lua"), done)

    return _INCLUDE.sub(include, source)


def prune(source: str) -> str:
    """``source`` without the top-level local functions that nothing in it reaches."""
    bodies = {m.group(1): _names(_checked(m.group(0))) for m in _FUNCTION.finditer(source)}
    pending = [w for w in _names(_FUNCTION.sub("", source)) if w in bodies]
    kept: set[str] = set()
    while pending:
        name = pending.pop()
        if name not in kept:
            kept.add(name)
            pending += [w for w in bodies[name] if w in bodies and w not in kept]
    return _FUNCTION.sub(lambda m: m.group(0) if m.group(1) in kept else "", source)


def _checked(function: str) -> str:
    """``function`` (a top-level function's text), refused if it breaks the convention: a
    line starting at the margin inside it means its ``end`` was elsewhere (a one-line
    function, say), and the match ran on into the code that follows."""
    inner = function.rstrip("\n").split("\n")[1:-1]
    stray = [line for line in inner if line and not line[0].isspace()]
    if stray:
        raise ValueError(f"Lua function not closed by 'end' alone on a line: {stray[0]!r}")
    return function


def _names(code: str) -> list[str]:
    """The words of ``code`` outside its comments."""
    return _WORD.findall(_COMMENT.sub("", code))


def script_source(name: str) -> tuple[str, str]:
    """The text of script ``name`` as written, and as Redis runs it."""
    raw = read(f"{name}.lua")
    return raw, prune(expand(raw))


def library(raw: str, name: str, flags: tuple[str, ...] = ()) -> str:
    """Script ``raw`` (as written) as a Redis function library of the one function ``name``
    (also the library's name), with ``flags`` (``allow-oom``, ``no-writes``).

    The header and includes are the library's top level, run once when it loads: the shared
    functions are made there, once. The body (what follows the last ``-- @include``) is the
    function run per call, ``KEYS`` and ``ARGV`` being the call's keys and arguments. What an
    include keeps for one call (a lower-case top-level local: a cache) is set anew at the
    start of each call, as a script run by EVAL finds it.
    """
    lines = raw.split("\n")
    header = next(i for i, line in enumerate(lines) if line.startswith("]]")) + 1
    includes = [i for i, line in enumerate(lines) if _INCLUDE.match(line)]
    if includes != list(range(header, header + len(includes))):
        raise ValueError(f"script {name}: its includes must follow its header, one per line")
    cut = header + len(includes)
    head, body = "\n".join(lines[:cut]), "\n".join(lines[cut:])
    top, body = prune(expand(head) + _BODY + body).split(_BODY)
    resets = "".join(f"  {var} = {value}\n" for var, value in _per_call(top, name))
    return (
        f"#!lua name={name}\nlocal KEYS, ARGV\n{top}\nlocal function run()\n{body}\nend\n"
        f"redis.register_function{{function_name = '{name}', flags = {{{_lua_list(flags)}}},"
        f" callback = function(keys, args)\n  KEYS, ARGV = keys, args\n{resets}"
        f"  return run()\nend}}\n"
    )


def _per_call(top: str, name: str) -> list[tuple[str, str]]:
    """The values ``top`` (a library's top level) keeps per call, and their first values;
    refused unless each is set on one line of its own."""
    lines = top.split("\n")
    found = []
    for index, line in enumerate(lines):
        if not re.match(r"local (?!function )[a-z_]", line):
            continue
        match = _PER_CALL.match(line)
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if match is None or "," in match.group(1) or following[:1].isspace():
            raise ValueError(f"script {name}: a value kept per call must be set on one line "
                             f"of its own: {line!r}")  # fmt: skip
        found.append((match.group(1), match.group(2)))
    return found


def _lua_list(words: tuple[str, ...]) -> str:
    return ", ".join(f"'{word}'" for word in words)
