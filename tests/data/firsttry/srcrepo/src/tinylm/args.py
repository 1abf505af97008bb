from dataclasses import dataclass


@dataclass
class LMSettings:
    vocab: int
    width: int
    depth: int = 2
    hidden: int = 128
