// A fused bias and activation kernel (a placeholder: archviz compiles nothing).
