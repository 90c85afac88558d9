"""``tokengeo list-models``: the registered model variants and their defaults."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--family", default=None, help="only this family (vit, gpt, encoder, ...)")


def run(args: argparse.Namespace) -> int:
    from tokengeo.models.registry import describe_models

    for line in describe_models(family=args.family):
        print(line)
    return 0
