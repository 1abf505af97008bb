import torch.nn as nn

from pkg.layers import Block  # its own package, named from the folder above pkg/ (no __init__.py, no installer)


class Net(nn.Sequential):
    def __init__(self, width=6, depth=4):
        super().__init__(*[Block(width) for _ in range(depth)])
