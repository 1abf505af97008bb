"""The code bank: every cited source file read once and highlighted once; pages carry their excerpts as HTML tables
cut from it (`table`), so code reads without JavaScript.

Records are data: a file is read only when a record vouches for it (`vouch`: its sha256, captured when the model was
walked) and its bytes still hash to that; any other path a record names is never opened."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from typing import Any, Iterable


_MAX_SOURCE_BYTES = 16 << 20


class CodeBank:
    def __init__(self) -> None:
        self._files: dict[str, dict[str, Any]] = {}  # key -> {"path", "lines" (text), "html" (lines)}
        self._by_abs: dict[str, str | None] = {}
        self._vouched: dict[str, set[str]] = {}  # absolute path -> sha256s records vouch for

    def vouch(self, record: Any) -> None:
        """Allow the files the record cites, each at the sha256 the record holds for it."""
        facts = dict(record.source.file_facts)
        for display, absolute in record.source.files:
            digest = (facts.get(display) or {}).get("sha256") if isinstance(facts.get(display), dict) else None
            if isinstance(digest, str) and isinstance(absolute, str):
                self._vouched.setdefault(absolute, set()).add(digest)

    def lines(self, absolute: str) -> list[str] | None:
        key = self.key(absolute, None)
        return self._files[key]["lines"] if key else None

    def key(self, absolute: str | None, display: str | None) -> str | None:
        if not absolute:
            return None
        if absolute in self._by_abs:
            return self._by_abs[absolute]
        self._by_abs[absolute] = None
        if absolute not in self._vouched:
            return None
        try:
            with open(absolute, "rb", buffering=0) as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    return None
                raw = f.read(_MAX_SOURCE_BYTES + 1)
            if len(raw) > _MAX_SOURCE_BYTES or hashlib.sha256(raw).hexdigest() not in self._vouched[absolute]:
                return None  # changed since the walk: these are not the lines the records cite
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        key = hashlib.sha1(((display or "") + "\0" + text).encode()).hexdigest()[:12]
        if key not in self._files:
            self._files[key] = {"path": display or os.path.basename(absolute), "text": text,
                                "lines": text.split("\n"), "html": None}
        self._by_abs[absolute] = key
        return key

    def used(self) -> list[str]:
        return sorted(self._files)

    def highlighted(self, key: str) -> list[str]:
        """The file's lines as pygments HTML (the code text escaped), highlighted once per file."""
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        f = self._files[key]
        if f["html"] is None:
            html = highlight(f["text"], PythonLexer(stripnl=False, ensurenl=True), HtmlFormatter(nowrap=True))
            f["html"] = html.split("\n")[: len(f["lines"])]
        return f["html"]

    def table(self, key: str, start: int, end: int, marks: Iterable[int], ids: set[int]) -> str:
        """Lines start..end as the HTML table a page shows (readable without JavaScript): marked lines get class
        `mark`; each line gets the anchor `L<n>` unless an earlier excerpt of the page (`ids`) has it."""
        lines = self.highlighted(key)
        marked = set(marks)
        rows = []
        for i in range(max(1, start), min(end, len(lines)) + 1):
            attrs = ' class="mark"' if i in marked else ""
            if i not in ids:
                ids.add(i)
                attrs += f' id="L{i}"'
            rows.append(f'<tr{attrs}><td class="ln">{i}</td><td class="src">{lines[i - 1]}</td></tr>')
        return '<table class="code hl"><tbody>' + "".join(rows) + "</tbody></table>"


def js_json(obj: Any) -> str:
    """JSON that is also safe to place anywhere a script can be: no raw `<`, U+2028 or U+2029."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    return s.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
