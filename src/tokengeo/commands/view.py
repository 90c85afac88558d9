"""``tokengeo view``: write an offline, interactive HTML explorer.

Three sources, one of them per call:

* ``--model M`` with ``--text``, ``--file`` or ``--corpus``: attention ``P``, ``I - P`` of
  Laplacian heads and head-output similarity ``S`` of every layer and head on that text
  (``--n-laplacian`` / ``--heads`` first make a Hugging Face model's heads Laplacian);
* ``--flow flow.json``: a flow run's tokens on the sphere over time, with E(t) and G^2(t);
* ``--report FOLDER``: a reproduce run's suites, tables and figures (``--run`` was its old
  name; a ``tokengeo train`` run folder is a ``--model``, as in ``probe RUN_DIR``).

The page (``--out``) holds its scripts and data; with a large model and text, the per-head
data goes to one folder beside it (``<page>_files/``). No network is used at view time.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from tokengeo.errors import ConfigError

MAX_TEXT_BYTES = 64 << 20  # far more text than any model's positions take


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tokengeo.commands import flags

    src = parser.add_argument_group("what to view (one of --model, --flow, --report)")
    src.add_argument("--model", help="'minilm', 'mpnet', 'smollm2-135m', hf:FOLDER (a Hugging Face "
                     "model folder) or a `tokengeo train` run folder")
    src.add_argument("--flow", help="flow.json of a `tokengeo flow` run (or its folder)")
    src.add_argument("--report", help="the --out folder of a `tokengeo reproduce` run")
    text = parser.add_argument_group("the text a --model reads (one of them)")
    text.add_argument("--text", help="the text itself")
    text.add_argument("--file", help="a UTF-8 text file")
    text.add_argument("--corpus", help="a corpus window: shakespeare, python-docs, or a text "
                      "file or folder (with --offset)")
    text.add_argument("--offset", type=int, default=0, help="character offset of the corpus "
                      "window (default 0)")
    text.add_argument("--max-tokens", type=int, default=None,
                      help="keep the first N tokens (default: all; --corpus: 256)")
    lap = parser.add_argument_group("view a Hugging Face model as laplacianized")
    lap.add_argument("--n-laplacian", type=int, default=None,
                     help="make the last k heads of every layer Laplacian")
    lap.add_argument("--heads", default=None,
                     help="Laplacian heads per layer, e.g. '0:1,2;3:0' (layer:heads;...)")
    parser.add_argument("--out", required=True, help="the page to write, e.g. view.html")
    parser.add_argument("--colour", choices=("log", "linear", "row"), default="log",
                        help="colour scale of P: log (4 decades below each head's largest "
                             "weight, readable beside an attention sink), linear, or row "
                             "(each query row linear to its own largest weight)")
    parser.add_argument("--colour-exclude", default=None, metavar="J,...",
                        help="key token positions left out of the colour scale, e.g. 0 for "
                             "an attention sink on the first token (their cells are clipped; "
                             "hover shows their exact weights)")
    flags.add_device(parser)
    flags.add_threads(parser)
    parser.add_argument("--inline-limit", type=float, default=48.0,
                        help="MB of per-head data kept inside the page; above it the data "
                        "goes to a folder beside the page (default 48)")


def parse_heads(text: str) -> dict[int, list[int]]:
    """``'0:1,2;3:0'`` -> ``{0: [1, 2], 3: [0]}``."""
    out: dict[int, list[int]] = {}
    try:
        for part in filter(None, (p.strip() for p in text.split(";"))):
            layer, heads = part.split(":")
            out[int(layer)] = [int(h) for h in heads.split(",") if h.strip()]
    except ValueError:
        raise ConfigError(f"--heads {text!r} must look like '0:1,2;3:0' (layer:head,head;...)"
                          ) from None
    return out


def run(args: argparse.Namespace) -> int:
    from tokengeo.commands.flags import apply_threads

    sources = [n for n in ("model", "flow", "report") if getattr(args, n)]
    if len(sources) != 1:
        raise ConfigError("give exactly one of --model (with --text, --file or --corpus), "
                          "--flow or --report; got "
                          f"{', '.join('--' + s for s in sources) or 'none'}")
    if not math.isfinite(args.inline_limit) or not 0 < args.inline_limit <= 1 << 20:
        raise ConfigError(f"--inline-limit {args.inline_limit} must be a number of MB in "
                          "(0, 1048576], e.g. --inline-limit 48")
    apply_threads(args.threads)
    from tokengeo.view.page import write_page

    out = _check_out(args.out)
    start = time.perf_counter()
    if args.model:
        payload, chunks, title = _heads(args)
    elif args.flow:
        payload, chunks, title = _flow(args.flow), {}, "tokengeo view: flow"
    else:
        from tokengeo.view.runs import read_run

        payload, chunks, title = read_run(args.report), {}, "tokengeo view: reproduce run"
    page = write_page(out, payload, chunks, title=title,
                      inline_limit=int(args.inline_limit * 2**20))
    size = page.stat().st_size
    print(f"wrote {page} ({size / 2**20:.1f} MB) in {time.perf_counter() - start:.1f} s")
    return 0


def _check_out(text: str) -> Path:
    out = Path(text).expanduser()
    if out.suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"--out {text!r} must name an .html file, e.g. --out view.html")
    if not out.parent.exists():
        raise ConfigError(f"the folder of --out {text!r} does not exist; create it first")
    from tokengeo.view.page import foreign_file

    foreign = foreign_file(out)
    if foreign is not None:
        raise ConfigError(f"--out {text!r} would replace {str(foreign)!r}, which tokengeo view "
                          "did not write; choose another --out or move it away")
    return out


def _read_text(args: argparse.Namespace) -> tuple[str, str, int | None]:
    given = [n for n in ("text", "file", "corpus") if getattr(args, n) is not None]
    if len(given) != 1:
        raise ConfigError("--model needs exactly one of --text, --file or --corpus")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise ConfigError(f"--max-tokens {args.max_tokens} must be >= 1")
    if args.text is not None:
        return args.text, "text given on the command line", args.max_tokens
    if args.file is not None:
        from tokengeo.io import read_text

        path = Path(args.file).expanduser()  # a FIFO or device is refused, never waited on
        try:
            text = read_text(path, f"--file {args.file!r}", limit=MAX_TEXT_BYTES)
        except ConfigError as exc:
            raise ConfigError(f"--file: {exc}; give a UTF-8 text file") from None
        return text, f"file {path.name}", args.max_tokens
    from tokengeo.view.loading import corpus_window

    return (corpus_window(args.corpus, args.offset), f"{args.corpus} from character "
            f"{args.offset}", args.max_tokens or 256)


def _heads(args: argparse.Namespace):
    from tokengeo.view.heads import check_page_size, extract_heads, model_heads
    from tokengeo.view.loading import check_model, encode_text, load_for_view
    from tokengeo.view.payloads import heads_payload

    exclude = _exclude(args.colour_exclude)  # refused before the model loads
    text, source, max_tokens = _read_text(args)  # a bad text is refused before the model loads
    if not text.strip():
        raise ConfigError(f"the text ({source}) is empty; give --text 'some words' or --file "
                          "notes.txt")
    if args.n_laplacian is not None and args.heads is not None:
        raise ConfigError("give --n-laplacian or --heads, not both")
    heads = parse_heads(args.heads) if args.heads is not None else None
    _quiet_transformers()  # bad input must stay one line: no load progress bars or warnings
    check_model(args.model)  # before the (slow) load
    from tokengeo.commands.flags import resolve_device

    device = resolve_device(args.device)  # a missing CUDA is refused before the model loads
    vm = load_for_view(args.model)
    vm.model.to(device)
    if args.n_laplacian is not None or args.heads is not None:
        _laplacianize(vm, args.n_laplacian, heads, args.heads)
    ids, tokens = encode_text(vm, text, max_tokens)
    sizes = model_heads(vm.model)
    if sizes is not None:  # the page's size, before the model runs
        check_page_size(*sizes, len(tokens))
    maps = extract_heads(vm.model, ids, tokens, model_name=vm.name)
    print(f"{len(tokens)} tokens, {maps.shape[0]} layers x {maps.shape[1]} heads",
          file=sys.stderr)
    payload, chunks = heads_payload(maps, text_source=source, colour=args.colour,
                                    exclude=exclude)
    return payload, chunks, f"tokengeo view: {vm.name}"


def _quiet_transformers() -> None:
    try:
        import transformers
    except ImportError:  # the missing package is named when a model loads
        return
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def _laplacianize(vm, n_laplacian: int | None, heads: dict | None, text: str | None) -> None:
    from tokengeo.probes.capture import is_hf_model

    if not is_hf_model(vm.model) or hasattr(vm.model, "blocks"):
        raise ConfigError("--n-laplacian / --heads apply to Hugging Face models; a tokengeo run "
                          "already has its Laplacian heads (set when it was trained)")
    from tokengeo.models.hf import laplacianize

    laplacianize(vm.model, n_laplacian, heads=heads)
    vm.name += f" (laplacianized: {text or f'last {n_laplacian} heads per layer'})"


def _flow(path: str) -> dict:
    from tokengeo.view.flow import flow_payload, read_flow_json, resimulate

    data = read_flow_json(path)
    preset, n_heads, result = resimulate(data)
    return flow_payload(data, preset, n_heads, result)


def _exclude(text: str | None) -> tuple[int, ...]:
    """--colour-exclude as token positions (their range is checked against the text)."""
    if text is None:
        return ()
    try:
        return tuple(int(j) for j in text.split(",") if j.strip())
    except ValueError:
        raise ConfigError(f"--colour-exclude {text!r} must be comma-separated token "
                          "positions, e.g. 0 or 0,5") from None
