// The binding of the fused kernel (a placeholder: archviz compiles nothing).
