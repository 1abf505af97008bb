from .modeling import Encoder, Segmenter


def build_small(checkpoint=None):
    return _build(width=16, depth=2)


def build_large(checkpoint=None):
    return _build(width=32, depth=3)


def _build(width, depth, classes=5):
    model = Segmenter(Encoder(width, depth), classes)
    return model
