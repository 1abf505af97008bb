"""`python -m archviz.cli`: the same program as the `archviz` console script."""

from . import main

main()
