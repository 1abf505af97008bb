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


def test_a_gallery_of_models_named_like_its_pages_keeps_every_page(tmp_path) -> None:
    """Two model folders named `compare.html` and `coverage.html` (tiny llama configs): the gallery's own compare
    and coverage pages stay its own, each model has its folder, and the index links both."""
    import archviz
    from transformers import LlamaConfig

    sources = []
    for name, layers in (("compare.html", 1), ("coverage.html", 2)):
        LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=layers, num_attention_heads=2,
                    num_key_value_heads=1, vocab_size=32).save_pretrained(tmp_path / name)
        sources.append(str(tmp_path / name))
    out = tmp_path / "g"
    archviz.gallery(sources, str(out), jobs=1, cache=False)
    for page in ("compare.html", "coverage.html", "index.html"):
        assert (out / page).is_file(), page
    assert "gallery" in (out / "coverage.html").read_text().lower()
    for folder in ("compare-html", "coverage-html"):
        assert (out / folder / "index.html").is_file(), folder
    index = (out / "index.html").read_text()
    assert 'href="compare-html/' in index and 'href="coverage-html/' in index
