"""The files archviz reads and writes, made safe: input that may be anything, output that must not hurt.

- `safeio`: bounded reads of untrusted input files (regular files only, a size cap, gzip inflated in bounded steps);
- `safejson`: JSON from untrusted files, parsed with bounds (nesting, integer size, lone surrogates, NaN);
- `safetoml`: TOML from untrusted files, the one TOML reader (tomllib, or tomli on Python 3.10), bounded;
- `outputs`: where `-o` may write, and the one atomic writer of every file and folder archviz writes;
- `sanitize`: untrusted text from those files made safe for a terminal or a CI log.

Nothing here imports torch or prints.
"""
