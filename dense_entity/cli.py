"""`dense-entity` command: `demo` (the end-to-end job) and `link` (top-k entities for text)."""

import argparse
import logging
import os
import sys


def _demo(args):
  from dense_entity import demo  # pylint: disable=g-import-not-at-top
  demo.run_demo(args.workspace, args.input, descriptions=args.descriptions,
                heldout_fraction=args.heldout_fraction, preset=args.preset,
                train_steps=args.train_steps, glove=args.glove, datasets=args.dataset)


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="dense-entity", description=__doc__)
  sub = parser.add_subparsers(dest="command", required=True)
  demo = sub.add_parser("demo", help="extract, train, export, index and evaluate end to end")
  demo.add_argument("--workspace", default="workspace", help="output directory")
  demo.add_argument("--input", action="append", help="dump glob (repeatable); default: "
                    "gensim's packaged Wikipedia sample")
  demo.add_argument("--descriptions", help="JSONL of entity descriptions ({title, text})")
  demo.add_argument("--heldout_fraction", type=float, default=0.1,
                    help="fraction of source pages held out for evaluation")
  demo.add_argument("--preset", default="small", help="training preset: small, paper, tiny")
  demo.add_argument("--train_steps", type=int, help="override the preset's training steps")
  demo.add_argument("--glove", help="GloVe text file initialising unigram embeddings")
  demo.add_argument("--dataset", action="append", default=[],
                    help="extra evaluation set FORMAT:PATH (aida:, jsonl:, nif:, wikinews:)")
  demo.set_defaults(fn=_demo)
  return parser


def main(argv=None):
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  logging.basicConfig(level=logging.WARNING)
  args = build_parser().parse_args(argv)
  return args.fn(args)


if __name__ == "__main__":
  sys.exit(main())
