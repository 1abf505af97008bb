"""Stage 4, group: a `ModelRecord` in, the same record with its grouping (`record.extra("grouping")`) out.

Identical layers and experts become one node with a multiplicity ("× 2 groups × 5 layers"), named from the code
(or a names file); `layers` finds the model's main layer list, which `inspect layer N` and the site's layer map use.
"""

from __future__ import annotations

from .layers import layer_note, layer_path, layer_stacks, main_layer_list, resolve_target
from .tree import NAMES_ENV, group, grouping, layer_membership, load_names, multiplicity_text

__all__ = ["group", "grouping", "load_names", "layer_membership", "multiplicity_text", "NAMES_ENV",
           "main_layer_list", "layer_path", "layer_stacks", "layer_note", "resolve_target"]
