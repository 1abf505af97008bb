"""Untrusted text made safe for a terminal or a CI log: control characters shown escaped, never sent.

A checkpoint's tensor names, a manifest's ``source`` and ``revision``, a rules file's labels and an error message
quoting any of them are data from a file archviz did not write. Sent to a terminal raw, ``\\x1b]0;...\\x07`` sets
the window title, ``\\x1b[2J`` clears the screen, ``\\r`` overwrites a line with a fake verdict, and in a GitHub
Actions log a line break starts a workflow command. :func:`printable` writes every such character as an escape
(``\\x1b``, ``\\r``, ``\\u202e``), so the text reads the same and does nothing; :func:`github_data` and
:func:`github_property` add GitHub's own escaping for workflow-command messages and properties.

Escaped: C0 controls (tab and line breaks included: one value, one line), DEL, C1 controls (``\\x9b`` is CSI to
some terminals), the bidirectional overrides and isolates (which reorder what a reader sees), zero-width and other
invisible format characters, the line and paragraph separators, and lone surrogates (which cannot be encoded).

Pure functions: no I/O, no imports beyond ``re``.
"""

from __future__ import annotations

import re

__all__ = ["github_data", "github_property", "json_text", "printable"]

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f"  # C0, DEL, C1
    "\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb"  # invisible, bidi, separators
    "\ud800-\udfff]"  # lone surrogates
)
# What JSON text can hold raw: not C0 (json.dumps escapes it; and its indent is made of newlines).
_UNSAFE_IN_JSON = re.compile(
    "[\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb\ud800-\udfff]"
)
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``str(text)`` with every character that could act on a terminal or hide text written as an escape."""
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_escape, s) if _UNSAFE.search(s) else s


def github_data(text: object) -> str:
    """A workflow command's message (after ``::``): :func:`printable`, then ``%``, CR and LF escaped as GitHub
    reads them (CR and LF cannot remain after :func:`printable`; escaped anyway, as GitHub documents)."""
    return printable(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(text: object) -> str:
    """A workflow command's property value (``file=``, ``title=``): :func:`github_data`, and ``:`` and ``,``."""
    return github_data(text).replace(":", "%3A").replace(",", "%2C")


def _json_escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group(0)):04x}"


def json_text(dumped: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with the characters :func:`printable` escapes written as
    ``\\uXXXX`` escapes: the same JSON value, safe on a terminal (JSON escapes C0 itself; not C1, bidi controls or
    lone surrogates)."""
    return _UNSAFE_IN_JSON.sub(_json_escape, dumped) if _UNSAFE_IN_JSON.search(dumped) else dumped
