"""The pipeline, after render: the stages run in order for one use, one function each, the records cache in front.

- `records_for(source, BuildOptions, PassOptions)`: build on meta → walk → the meta pass → group (or a records file
  read), the records cache in front of the build; what `archviz.load` and every command but `cost` and `probe` use;
- `cost_for(source, BuildOptions, CostOptions)`: the records with `extra("cost")` (archviz.cost.measure), cached too;
- `cached(kind, ...)`: the records cache in front of any build (archviz.records.cache);
- `site.make_site(sources, output, ..., SiteOptions)`: `archviz build`'s explorer, records made and rendered;
- `gallery.write_gallery(sources, output, GalleryOptions)`: `archviz gallery`'s site of many models, counted in
  worker processes (`gallery_jobs`). These two are imported from their modules (they pull in the renderers).

Options come as small frozen objects: `BuildOptions` (archviz.sources), `PassOptions` (here), `CostOptions`
(archviz.cost); how a run shows what it does, as a `Feedback` (silent by default: the library never prints).
Importing this package imports no torch: a cache hit builds nothing.
"""

from __future__ import annotations

from .cached import cached
from .cost import cost_for
from .options import QUIET, Feedback, PassOptions
from .records import is_records_file, read_records, records_for, with_pass_counts

__all__ = ["records_for", "cost_for", "cached", "PassOptions", "Feedback", "QUIET", "is_records_file",
           "read_records", "with_pass_counts"]
