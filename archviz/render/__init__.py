"""Renderers: pure functions of records, never importing torch.

- `terminal`, `grouped`: rich renderables (tables, trees, cards) for the CLI to print;
- `views`: the JSON views (`summary`'s and `inspect`'s JSON); `jsondump`: indented JSON text, as json.dumps writes it;
- `site/`: the static HTML explorer.
"""
