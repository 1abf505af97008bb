"""Which folder a site may replace; the writing itself is archviz.files.outputs.write_folder (files go to a temp folder
beside the output, which is swapped into place, and stale temp folders of killed builds are swept).

Only a folder archviz made is ever replaced: its marker (`.archviz-site`) lists every file the build wrote with its
sha256, and the folder must hold exactly those files, unchanged (a file merely named `.archviz-site` in a folder of
one's own proves nothing). A site whose marker predates the list is accepted when every file it holds is one a site
has (pages, code, search index, static files)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from typing import Mapping

from ...errors import PYTHON_WORDS, spelled_bytes
from ...files.outputs import check_folder_target, write_folder
from ...records.recordcheck import want_table

MARKER = ".archviz-site"  # a file in every site's root: only folders holding it are ever replaced


_MAX_MARKER_BYTES = 64 << 20
# what a site held before its marker listed its files (site 1 without "files")
_SITE_FILE = re.compile(r"^(index\.html|search\.js|code/[0-9a-f]{12}\.js|static/[\w./-]+|[\w.-]+/index\.html|"
                        r"[\w.-]+/n/[\w./-]+\.html)$")


def marker_bytes(files: Mapping[str, bytes], models: list[str]) -> bytes:
    """The marker of a site holding `files`: archviz's, with every file's sha256."""
    listed = {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items() if rel != MARKER}
    return (json.dumps({"generator": "archviz", "site": 1, "models": models, "files": listed}, sort_keys=True,
                       separators=(",", ":")) + "\n").encode()


def _not_archviz_made(output: str) -> str | None:
    """Why the folder `output` is not a site archviz wrote (None: it is, untouched since)."""
    marker = os.path.join(output, MARKER)
    try:
        st = os.lstat(marker)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_MARKER_BYTES:
            return f"its {MARKER} is not archviz's marker"
        with open(marker, "rb") as f:
            data = want_table("marker", json.loads(f.read()))
        listed = data.get("files")
        if listed is not None:
            want_table("files", listed)
    except FileNotFoundError:
        return "it holds no archviz marker"
    except (OSError, ValueError, RecursionError):  # ValueError: not JSON, or a field of the wrong type
        return f"its {MARKER} is not archviz's marker"
    if data.get("generator") != "archviz" or data.get("site") != 1:
        return f"its {MARKER} is not archviz's marker"
    for dirpath, dirnames, filenames in os.walk(output):
        for d in list(dirnames):
            if os.path.islink(os.path.join(dirpath, d)):
                return f"it holds a link archviz did not write ({os.path.relpath(os.path.join(dirpath, d), output)})"
        for fn in filenames:
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, output).replace(os.sep, "/")
            if rel == MARKER:
                continue
            try:
                regular = stat.S_ISREG(os.lstat(full).st_mode)
            except OSError:
                regular = False
            if not regular:
                return f"it holds {rel}, which archviz did not write"
            if listed is None:
                if not _SITE_FILE.match(rel):
                    return f"it holds {rel}, which archviz did not write"
                continue
            want = listed.get(rel)
            if not isinstance(want, str):
                return f"it holds {rel}, which archviz did not write"
            h = hashlib.sha256()
            with open(full, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            if h.hexdigest() != want:
                return f"{rel} was changed since archviz wrote it"
    return None


def check_target(output: str, flag: str = "-o") -> None:
    """Refuse `output` unless it is new, empty, or a site archviz wrote and nobody changed since (`-`: refused)."""
    check_folder_target(output, _not_archviz_made, flag)


def spelled_files(files: Mapping[str, bytes], words: Mapping[str, str]) -> dict[str, bytes]:
    """A site's files with the options its pages name spelled with `words` (archviz.errors.spelled: the CLI gives
    its flags), the marker listing the files as spelled."""
    spelled = {rel: spelled_bytes(data, words) for rel, data in files.items()}
    if MARKER in files and any(spelled[rel] is not files[rel] for rel in files):
        spelled[MARKER] = marker_bytes(spelled, json.loads(files[MARKER])["models"])
    return spelled


def write_site(files: Mapping[str, bytes], output: str, flag: str = "-o",
               words: Mapping[str, str] = PYTHON_WORDS) -> None:
    """Write every file into a temp folder beside `output`, then swap it into place (files.outputs.write_folder);
    the options the pages name spelled with `words` (`spelled_files`)."""
    write_folder(spelled_files(files, words), output, _not_archviz_made, flag)
