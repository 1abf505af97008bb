"""The package list, which pyproject.toml cannot state without naming every subpackage: archviz's own packages, and
the site templates (`templates/`, with their static files), which stay at the top of the checkout and ship inside the
wheel as `archviz/templates` (read through importlib.resources, render/site/templates.py)."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["archviz", "archviz.*"]), "archviz.templates"],
      package_dir={"archviz.templates": "templates"})
