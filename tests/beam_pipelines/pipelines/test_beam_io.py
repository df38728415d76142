"""Pipeline options: a local runner that needs no download unless --runner says otherwise."""

from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.options.pipeline_options import StandardOptions

from beam_pipelines.pipelines import beam_io


def test_default_runner_is_the_local_fn_api_runner_not_prism():
  # Beam's default DirectRunner tries its Prism runner first, downloading it from GitHub (and,
  # offline, failing before it falls back) on every run.
  options = beam_io.default_pipeline_options([])
  assert options.view_as(StandardOptions).runner == beam_io.LOCAL_RUNNER == "FnApiRunner"
  direct = options.view_as(DirectOptions)
  assert (direct.direct_num_workers, direct.direct_running_mode) == (1, "in_memory")


def test_a_runner_given_is_kept():
  for runner in ("DirectRunner", "DataflowRunner", "PrismRunner"):
    options = beam_io.default_pipeline_options([f"--runner={runner}"])
    assert options.view_as(StandardOptions).runner == runner
  options = beam_io.default_pipeline_options(["--direct_running_mode=multi_processing",
                                              "--direct_num_workers=2"])
  assert options.view_as(DirectOptions).direct_running_mode == "multi_processing"
  assert options.view_as(StandardOptions).runner == beam_io.LOCAL_RUNNER
