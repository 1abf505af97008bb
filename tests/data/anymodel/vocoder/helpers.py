import not_installed_plot_pkg  # a plotting package the training script uses; building never draws

not_installed_plot_pkg.use("Agg")  # configured at import


def padding(kernel, dilation=1):
    return (kernel * dilation - dilation) // 2
