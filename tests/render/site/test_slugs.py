"""A model's folder in a site or gallery never takes a name of the site's own files (issue 46): a model named
`compare.html` (a folder of that name) was written over the gallery's compare page, and the run failed (File
exists) with the pages half-made."""

from __future__ import annotations

from archviz.render.site.pages import slug_for

# the files and folders at the root of a gallery (archviz/render/site/gallery.py's module doc) and a pair's page
ROOT = {"index.html", "compare.html", "coverage.html", "search.js", "static", "code", ".archviz-site",
        "llama--gpt2.html"}


def test_no_model_folder_is_named_like_a_page_of_the_site() -> None:
    used: set[str] = set()
    names = ["compare.html", "coverage.html", "index.html", "search.js", "static", "code", "llama--gpt2.html",
             "Compare.HTML", "llama"]
    slugs = [slug_for(n, used) for n in names]
    assert not set(slugs) & ROOT, slugs
    assert len(set(slugs)) == len(names)  # each its own folder
    assert slugs[0] == "compare-html" and slugs[-1] == "llama"  # stable, and said by the name it is made of
