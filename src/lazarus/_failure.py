"""The text a failed attempt leaves behind: its message and its stack trace, each capped.

One exception with a message of megabytes, recorded for every attempt, would otherwise make
dead letters, events and dashboard pages of hundreds of megabytes. A message keeps its
beginning; a stack keeps its first and last frames (where a failure starts and where it
ends) and drops the middle. Either way a marker says how much was cut, and cuts fall on
UTF-8 character boundaries.
"""

from __future__ import annotations

import json
import linecache
import traceback

DEFAULT_MAX_ERROR_BYTES = 4 * 1024
DEFAULT_MAX_STACK_BYTES = 16 * 1024
MIN_CAP_BYTES = 256  # room for the cut marker and something worth reading


def failure_reason(error: BaseException, max_bytes: int) -> str:
    """The message recorded for ``error``: ``str(error)`` (or its class name when empty),
    at most ``max_bytes`` bytes of UTF-8."""
    return cap_text(str(error) or type(error).__name__, max_bytes)


def format_stack(error: BaseException, *, max_message_bytes: int, max_bytes: int) -> str:
    """The traceback as Python prints it, without the caret lines (computing those re-parses
    every frame's source, which made formatting most of the cost of a failure); each
    exception's own line is capped at ``max_message_bytes`` and the whole at ``max_bytes``."""
    lines = []
    for cause in _chain(error):
        lines.append("Traceback (most recent call last):\n")
        tb = cause.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            lines.append(f'  File "{code.co_filename}", line {tb.tb_lineno}, in {code.co_name}\n')
            # Straight from the line cache: traceback.extract_tb first checks every frame's
            # file on disk (a stat() each), which cost more than the rest of a failure.
            line = linecache.getline(code.co_filename, tb.tb_lineno, tb.tb_frame.f_globals)
            if line.strip():
                lines.append(f"    {line.strip()}\n")
            tb = tb.tb_next
        lines.append(cap_text(exception_line(cause), max_message_bytes, keep_newline=True))
    return cap_middle("".join(lines), max_bytes)


def exception_line(error: BaseException) -> str:
    """What ``traceback.format_exception_only`` prints for ``error``, joined: for the usual
    exception (no syntax error, no notes, a ``str`` that works) made here, without building
    a ``TracebackException`` (a third of formatting a stack)."""
    kind = type(error)
    name, module = kind.__qualname__, kind.__module__
    usual = getattr(error, "__notes__", None) is None and isinstance(module, str)
    if usual and not isinstance(error, SyntaxError):
        if module not in ("__main__", "builtins"):
            name = f"{module}.{name}"
        try:
            message = str(error)
        except Exception:  # traceback words this case itself
            message = None
        if message is not None:
            return f"{name}: {message}\n" if message else f"{name}\n"
    return "".join(traceback.format_exception_only(type(error), error))


def failed_attempt(
    attempt: int, started_at: int, finished_at: int, worker: str, error: str, error_type: str
) -> str:
    """The JSON record of a failed attempt, the text ``json.dumps`` makes of it (ASCII, its
    separators), without building an encoder for every failure."""
    return (
        f'{{"attempt": {int(attempt)}, "startedAt": {int(started_at)}, '
        f'"finishedAt": {int(finished_at)}, "worker": {_json_text(worker)}, '
        f'"outcome": "failed", "error": {_json_text(error)}, '
        f'"errorType": {_json_text(error_type)}}}'
    )


_json_text = json.encoder.encode_basestring_ascii


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it was raised from, the first cause first."""
    chain = [error]
    while chain[-1].__cause__ is not None and len(chain) < 10:
        chain.append(chain[-1].__cause__)
    return chain[::-1]


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _fits(text: str, max_bytes: int) -> bool:
    # A character is at most 4 bytes of UTF-8: short texts need no encoding to be measured.
    return len(text) * 4 <= max_bytes or len(_utf8(text)) <= max_bytes


def cap_text(text: str, max_bytes: int, *, keep_newline: bool = False) -> str:
    """``text`` cut to its first bytes, with a marker, when longer than ``max_bytes``."""
    if _fits(text, max_bytes):
        return text
    data = _utf8(text)
    marker = f" [... {{}} of {len(data)} bytes cut]" + ("\n" if keep_newline else "")
    room = max(max_bytes - len(marker.format(len(data))), 0)
    head = data[:room].decode("utf-8", "ignore")  # drops a character cut in half
    return head + marker.format(len(data) - len(_utf8(head)))


def cap_middle(text: str, max_bytes: int) -> str:
    """``text`` without its middle, with a marker, when longer than ``max_bytes``: the head
    and the tail are kept, each ending (or starting) on a line boundary where one is near."""
    if _fits(text, max_bytes):
        return text
    data = _utf8(text)
    marker = f"[... {{}} of {len(data)} bytes cut ...]\n"
    room = max(max_bytes - len(marker.format(len(data))), 0)
    head = _whole_lines(data[: room // 2], from_end=False).decode("utf-8", "ignore")
    rest = room - len(_utf8(head))
    tail = _whole_lines(data[len(data) - rest :] if rest else b"", from_end=True)
    tail_text = tail.decode("utf-8", "ignore")  # "ignore" drops a character cut in half
    cut = len(data) - len(_utf8(head)) - len(_utf8(tail_text))
    return head + marker.format(cut) + tail_text


def _whole_lines(chunk: bytes, *, from_end: bool) -> bytes:
    """``chunk`` trimmed to whole lines: a head to its last newline, a tail from its first,
    unless that would drop more than half of it (then one long line is cut inside)."""
    if from_end:
        start = chunk.find(b"\n") + 1
        return chunk[start:] if 0 < start <= len(chunk) // 2 else chunk
    end = chunk.rfind(b"\n") + 1
    return chunk[:end] if end >= len(chunk) // 2 else chunk
