"""``tokengeo list-models``: the registered model variants and their defaults."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--family", default=None, help="only this family (vit, gpt, encoder, ...)")


def run(args: argparse.Namespace) -> int:
    from tokengeo.errors import ConfigError
    from tokengeo.models.registry import describe_models, get_entry, list_models

    families = sorted({get_entry(name).family for name in list_models()})
    if args.family is not None and args.family not in families:
        raise ConfigError(f"unknown model family {args.family!r}; choose one of {families}")
    for line in describe_models(family=args.family):
        print(line)
    return 0
