"""The processes archviz starts, owned from start to end: the gallery's worker server (and the processes it forks),
the probe's ranks under torch.distributed, and the one-process group some model code insists on.

- `owner`: every child in a process group of its own that archviz ends, with every process in it, whenever the
  command ends (normally, on an error, on Ctrl-C, SIGTERM or SIGHUP), and that ends by itself if archviz is killed;
  a documented cap on how many;
- `environment`: what a child starts with: archviz's own import path, never the current folder ahead of the
  standard library;
- `loopback`: every torch.distributed group archviz creates listens on the loopback interface only.

Nothing here imports torch at import time or prints.
"""
