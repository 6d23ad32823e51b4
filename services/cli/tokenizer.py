"""`pdd-emu tokenizer export DIR`: the mesh's tokenizer as files aiperf and transformers can load offline."""

from __future__ import annotations

import argparse
from pathlib import Path

from services.cli.errors import fail


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("tokenizer", help="export the mesh's tokenizer for load generators")
    verbs = parser.add_subparsers(dest="tokenizer_command", metavar="VERB", required=True)
    export = verbs.add_parser("export", help="write tokenizer.json (Hugging Face tokenizers) and its config")
    export.add_argument("directory", help="folder to write; created if missing")
    export.add_argument("--model", default="llama3-8b", help="model profile whose vocabulary to use")
    export.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    from services.engine.tokenizer_export import export
    from services.profiles import UnknownProfileError, load_model

    try:
        model = load_model(args.model)
    except (UnknownProfileError, ValueError) as error:
        fail(str(error))
    for path in export(Path(args.directory), args.model, model.vocab_size, model.max_context):
        print(path)
    return 0
