"""``tokengeo list-models``: the registered model variants and their defaults, or (``--named``)
the named pretrained models that ``similarity --model`` and ``train --model hf:<name>`` take."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--family", default=None, help="only this family (vit, gpt, encoder, ...)")
    parser.add_argument("--named", action="store_true",
                        help="list the named pretrained models instead (tokengeo.models.names)")


def run(args: argparse.Namespace) -> int:
    from tokengeo.errors import ConfigError
    from tokengeo.models.registry import describe_models, get_entry, list_models

    if args.named:
        if args.family is not None:
            raise ConfigError("--named lists pretrained models, which have no --family; drop one")
        from tokengeo.models.names import describe_named

        for line in describe_named():
            print(line)
        return 0
    families = sorted({get_entry(name).family for name in list_models()})
    if args.family is not None and args.family not in families:
        raise ConfigError(f"unknown model family {args.family!r}; choose one of {families}")
    for line in describe_models(family=args.family):
        print(line)
    return 0
