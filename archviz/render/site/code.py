"""The code bank: every cited source file read once, highlighted once, and shipped as one `code/<hash>.js`."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any


class CodeBank:
    def __init__(self) -> None:
        self._files: dict[str, dict[str, Any]] = {}  # key -> {"path", "lines" (text), "html" (lines)}
        self._by_abs: dict[str, str | None] = {}

    def lines(self, absolute: str) -> list[str] | None:
        key = self.key(absolute, None)
        return self._files[key]["lines"] if key else None

    def key(self, absolute: str | None, display: str | None) -> str | None:
        if not absolute:
            return None
        if absolute in self._by_abs:
            return self._by_abs[absolute]
        try:
            with open(absolute, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            self._by_abs[absolute] = None
            return None
        key = hashlib.sha1(((display or "") + "\0" + text).encode()).hexdigest()[:12]
        if key not in self._files:
            self._files[key] = {"path": display or os.path.basename(absolute), "text": text,
                                "lines": text.split("\n"), "html": None}
        self._by_abs[absolute] = key
        return key

    def used(self) -> list[str]:
        return sorted(self._files)

    def script(self, key: str) -> str:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        f = self._files[key]
        if f["html"] is None:
            html = highlight(f["text"], PythonLexer(stripnl=False, ensurenl=True), HtmlFormatter(nowrap=True))
            f["html"] = html.split("\n")[: len(f["lines"])]
        return f"(window.ARCHVIZ_CODE=window.ARCHVIZ_CODE||{{}})[{json.dumps(key)}]={js_json(f['html'])};\n"


def js_json(obj: Any) -> str:
    """JSON that is also safe to place anywhere a script can be: no raw `<`, U+2028 or U+2029."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    return s.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
