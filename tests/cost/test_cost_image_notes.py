"""An image model whose constructor takes `**kwargs` (as Swin's does) swallows the runtime limits `cost` builds a
model file with: one pass is one image, and the output says nothing of cache limits or KV buffers it never had. Its
image is the size its constructor's defaults name (`img_size=16`), where no config names one."""

from __future__ import annotations

import json

MODEL = '''
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, in_chans=3, width=8, num_classes=10, img_size=16, **kwargs):
        super().__init__()
        self.stem = nn.Conv2d(in_chans, width, 4, stride=4)
        self.head = nn.Linear(width * (img_size // 4) ** 2, num_classes)

    def forward(self, x):
        return self.head(self.stem(x).flatten(1))
'''


def test_an_image_pass_says_nothing_of_cache_limits(archviz_cli, tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    r = archviz_cli("cost", tmp_path / "model.py", "--batch", 1, "--json")
    assert r.returncode == 0, r.stderr
    cost = json.loads(r.stdout)
    notes = " ".join(cost.get("notes", []))
    assert "max_seq_len" not in notes and "buffers' layout" not in notes
    assert "image" in notes and "no decode step" in notes
    width, side = 8, 16 // 4  # the Conv2d's MACs (4×4×3 per output) and the head's, ×2 FLOPs
    flops = 2 * (width * side * side * 4 * 4 * 3 + width * side * side * 10)
    assert cost["prefill"]["flops"] == flops
