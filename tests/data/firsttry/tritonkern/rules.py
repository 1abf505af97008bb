import archviz.kernels


@archviz.kernels.shape_rule("model._scale_kernel")
def scale(x, y, n):
    return None  # writes y in place: y keeps the shape it was made with
