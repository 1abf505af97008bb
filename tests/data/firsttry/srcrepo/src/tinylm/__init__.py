"""A model package in a src/ layout, imported as its users import it (archviz test fixture)."""
