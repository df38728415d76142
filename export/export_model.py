"""Exports the trained towers as SavedModels: `python -m export.export_model`.

Usage:
  python -m export.export_model --model_dir=WS/model --export_dir=WS/export
Writes WS/export/{mention_encoder,entity_encoder}/ and export_manifest.json (export.savedmodel).
An --export_dir that holds anything but an earlier export is refused before the export starts.
"""

import json
import os

from absl import flags

from dense_entity.common import entry

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Training model_dir (config.json + checkpoints).")
flags.DEFINE_string("export_dir", None, "Destination of the SavedModels.")


def export_model(model_dir: str, export_dir: str) -> dict:
  """Restores the latest checkpoint of `model_dir` and exports both encoders.

  Raises:
    NotADirectoryError, FileExistsError: `export_dir` is a file, or holds something other than
      an earlier export (another stage's output, other files); checked before the export.
    FileNotFoundError: `model_dir` holds no trained model.
  """
  from dense_entity.common import fileio  # pylint: disable=g-import-not-at-top
  fileio.check_output_dir(export_dir, fileio.EXPORT, "--export_dir")
  from dense_entity.serving import savedmodel  # pylint: disable=g-import-not-at-top
  from dense_entity.training import trainer  # pylint: disable=g-import-not-at-top
  model, _ = trainer.restore_model(model_dir)
  return savedmodel.export_encoders(model, export_dir,
                                    extra={"model_dir": os.path.abspath(model_dir)})


def main(argv):
  del argv
  print(json.dumps(export_model(FLAGS.model_dir, FLAGS.export_dir), indent=2))


if __name__ == "__main__":
  flags.mark_flags_as_required(["model_dir", "export_dir"])
  entry.run(main, "python -m export.export_model")
