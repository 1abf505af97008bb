"""The options several commands share, each declared once as a typer `Annotated` type (a command's parameter
`config: Config = None` is `--config`); an option one command alone takes is declared beside that command.

Where two commands take a flag of the same name that means something else in each (`cost --batch` counts sequences
of its prefill and decode, `probe --batch` sizes both of its passes; `check --checkpoint` is required, `gallery
--checkpoint` repeats MODEL=MANIFEST), each command declares its own."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer


def flag(*names: str, **kw: Any) -> Any:
    """A bool option: no value follows it, so its help shows no `<bool>` type."""
    return typer.Option(*names, metavar="", **kw)


# ---------------------------------------------------------------------------------------------------------------------
# The model: what a SOURCE is and how it is built (archviz.sources.options.BuildOptions)

Source = Annotated[str, typer.Argument(help="hf:<model_type> | config.json | model folder | model.py | "
                                            "package.module:callable")]
Config = Annotated[Optional[str], typer.Option("--config", "-c", help="config.json of a reference model.py (its "
                                               "config object, or the keyword arguments of a builder or "
                                               "package.module:callable)")]
Set = Annotated[Optional[list[str]], typer.Option("--set", help="override a config field (a factory: pass a keyword "
                                                  "argument): key=value, the value read as JSON (4, true, null, "
                                                  "[1, 2]), else a Python literal (None, True, False), else a "
                                                  "string (repeatable)")]
ModelClass = Annotated[Optional[str], typer.Option("--model-class", help="reference: the model's nn.Module class "
                                                   "or builder function (Class.from_name too)")]
ConfigClass = Annotated[Optional[str], typer.Option("--config-class", help="reference: the class the config JSON "
                                                    "builds (default: the one the model's constructor takes)")]
Tokenizer = Annotated[Optional[str], typer.Option("--tokenizer", help="reference: tokenizer.json for "
                                                                     "constructors that take a tokenizer")]
WorldSize = Annotated[Optional[int], typer.Option("--world-size", help="reference: tensor-parallel world size "
                                                                      "(module global world_size)")]
Rank = Annotated[Optional[int], typer.Option("--rank", help="reference: tensor-parallel rank")]
TrustRemoteCode = Annotated[bool, flag("--trust-remote-code", help="transformers folder: import and run the "
                                       ".py files its config.json's auto_map names (the model's own code) "
                                       "instead of transformers' class")]
Quantized = Annotated[bool, flag("--quantized", help="transformers: lay the modules out as config.json's "
                                 "quantization_config says, as from_pretrained does on a GPU (fp8 weights with "
                                 "their scales), instead of the unquantized modules from_config builds")]

# ---------------------------------------------------------------------------------------------------------------------
# The meta pass (archviz.pipeline.PassOptions)

Shapes = Annotated[bool, flag("--shapes/--no-shapes", help="run the meta forward pass for in/out shapes and call "
                                                           "sites")]
Input = Annotated[Optional[list[str]], typer.Option("--input", help="a forward input for the meta pass, beside "
                                                    "the default token ids or replacing the one of its name: "
                                                    "name=B,T,512[:dtype], name=int:5, name=none (repeatable); "
                                                    "name a dim H=224, or H alone to take the default input's "
                                                    "size; a list of dicts name=[{image: 3,1024,1024}], a dict "
                                                    "name={tokens: B,T}; @inputs.toml or @inputs.json: a file of "
                                                    "them")]
KernelRules = Annotated[Optional[str], typer.Option("--kernel-rules", help="a .py file declaring shape rules "
                                                    "(and FLOPs) with @archviz.kernels.shape_rule(...)")]
Batch = Annotated[Optional[int], typer.Option("--batch", help="batch size B for the meta forward pass (default: a "
                                              "value no width of the model equals)")]
Seq = Annotated[Optional[int], typer.Option("--seq", help="sequence length T for the meta forward pass")]
EveryBlock = Annotated[bool, flag("--every-block", help="run every repeated layer, MoE block and expert in "
                                  "the meta pass instead of answering identical ones from the first "
                                  "that ran (slower; for blocks that differ in what their classes, "
                                  "tensors and attributes do not show)")]
Train = Annotated[bool, flag("--train", help="trace the meta pass in training mode (dropout, batch statistics, "
                             "auxiliary heads) instead of eval mode, the default")]

# ---------------------------------------------------------------------------------------------------------------------
# What the records are shown with (the grouping's names, the site's annotations and links)

Names = Annotated[Optional[str], typer.Option("--names", help="titles of grouped nodes: a TOML/JSON file mapping "
                                                              "paths, globs or classes to names")]
Annotations = Annotated[Optional[str], typer.Option("--annotations", help="TOML of node titles, descriptions and "
                                                                         "claims checked against the code")]
SourceUrl = Annotated[Optional[str], typer.Option("--source-url", help="link template for the model's own code: "
                                                                      "{path}, {start}, {end}")]
SiteFolder = Annotated[str, typer.Option("--output", "-o", help="the site folder (replaced atomically)")]
Gpus = Annotated[Optional[int], typer.Option("--gpus", help="GPUs of each --hardware device (tensor and expert "
                                             "parallel); default 1")]

# ---------------------------------------------------------------------------------------------------------------------
# Checkpoints (check, manifest) and reports (check, diff)

HubTimeout = Annotated[float, typer.Option("--timeout", min=0.1, help="hf:// only: seconds each HTTP request may "
                                           "take, its whole answer included; the whole read gets 30 times that")]
RankPattern = Annotated[Optional[str], typer.Option(
    "--rank-pattern", help="--world-size without --rank: each rank's shard file in the folder, {rank} and "
                           "{world_size} filled in (default model{rank}-mp{world_size}.safetensors, as DeepSeek's "
                           "convert.py writes)")]
Format = Annotated[str, typer.Option("--format", "-f", help="table | github (workflow annotations) | json")]
Limit = Annotated[int, typer.Option("--limit", help="rows per table, annotations of --format github")]

# ---------------------------------------------------------------------------------------------------------------------
# Every command

NoCache = Annotated[bool, flag("--no-cache", help="build the records again instead of reusing those of an "
                               "unchanged source from the records cache ($XDG_CACHE_HOME/archviz; "
                               "ARCHVIZ_NO_CACHE=1 does the same)")]
Json = Annotated[bool, flag("--json", help="print JSON instead of tables")]
Debug = Annotated[bool, flag("--debug", help="show tracebacks")]
