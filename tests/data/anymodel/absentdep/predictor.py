import not_installed_vision_pkg  # what the predictor needs; building the model never touches it
from not_installed_vision_pkg.ops import nms


class Predictor:
    def __init__(self, model):
        self.model = model
        self.nms = nms
