"""Pipeline options: a local runner that needs no download unless --runner says otherwise."""

import os
import signal
import time

import apache_beam as beam
from apache_beam.coders import VarIntCoder
from apache_beam.internal import pickler
from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.options.pipeline_options import TypeOptions
from apache_beam.transforms import userstate
from apache_beam.typehints import typecheck
import pytest
import tensorflow as tf

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


def test_construction_type_checks_are_off_unless_asked():
  # Beam's bytecode type inference of every step only cost construction time here (issue 17);
  # --pipeline_type_check (ours: Beam has only the negative flag) turns it back on.
  assert not beam_io.default_pipeline_options([]).view_as(TypeOptions).pipeline_type_check
  options = beam_io.default_pipeline_options(["--pipeline_type_check"])
  assert options.view_as(TypeOptions).pipeline_type_check
  options = beam_io.default_pipeline_options(["--no_pipeline_type_check"])
  assert not options.view_as(TypeOptions).pipeline_type_check


def _assert_sampling_period(period_ms: int) -> None:
  """Runs a small pipeline in memory whose step records the state sampler period (ms) of the
  bundle it runs in; fails unless every element saw `period_ms`."""
  # pylint: disable=g-import-not-at-top
  import apache_beam as beam
  from apache_beam.runners.worker import statesampler
  from apache_beam.testing import util
  # pylint: enable=g-import-not-at-top
  with beam.Pipeline(options=beam_io.default_pipeline_options([])) as p:
    periods = (p | beam.Create([1, 2, 3])
               | beam.Map(lambda _: statesampler.get_current_tracker().sampling_period_ms))
    util.assert_that(periods, util.equal_to([period_ms] * 3))


def test_bundles_sample_briefly_inside_the_context_and_as_beam_does_outside():
  """Beam's local runner ends each bundle by joining a sampler thread that sleeps up to 200 ms
  (issue 17: 0.35-0.50 s of the 7 dumps' 6.4 s); inside brief_state_sampling the bundles
  sample every ms, and Beam's class is back once the last context closes."""
  from apache_beam.runners.worker import statesampler  # pylint: disable=g-import-not-at-top
  beams = statesampler.StateSampler
  _assert_sampling_period(200)
  with beam_io.brief_state_sampling():
    _assert_sampling_period(1)
    with beam_io.brief_state_sampling(5):  # nested: the outer period holds
      _assert_sampling_period(1)
    assert statesampler.StateSampler is not beams
    _assert_sampling_period(1)
  assert statesampler.StateSampler is beams
  _assert_sampling_period(200)
  with pytest.raises(RuntimeError, match="boom"):
    with beam_io.brief_state_sampling(3):
      _assert_sampling_period(3)
      raise RuntimeError("boom")
  assert statesampler.StateSampler is beams
  with pytest.raises(ValueError, match="at least 1"):
    with beam_io.brief_state_sampling(0):
      pass
  assert statesampler.StateSampler is beams


def _counting_inspections(monkeypatch):
  """Puts a counting wrapper of Beam's get_dofn_specs in its place: ([DoFn inspected, ...],
  the wrapper)."""
  beams, inspected = userstate.get_dofn_specs, []

  def counting(dofn):
    inspected.append(dofn)
    return beams(dofn)

  monkeypatch.setattr(userstate, "get_dofn_specs", counting)
  return inspected, counting


def test_each_dofn_is_inspected_once_inside_the_context_with_beams_answers(monkeypatch):
  """Beam inspects every method of a DoFn for state and timer parameters at 8 places of a
  local run (issue 17: 824 calls, 0.36 s of a 1.0 s extraction of 3 pages); inside
  introspect_once each DoFn object is inspected once, with the same answer, and a stateful
  pipeline still runs (its state and timer found)."""
  # pylint: disable=g-import-not-at-top
  import apache_beam as beam
  from apache_beam.coders import VarIntCoder
  from apache_beam.testing import util
  from apache_beam.transforms import userstate
  # pylint: enable=g-import-not-at-top
  beams = userstate.get_dofn_specs

  class Stateful(beam.DoFn):
    TOTAL = userstate.ReadModifyWriteStateSpec("total", VarIntCoder())
    FLUSH = userstate.TimerSpec("flush", beam.TimeDomain.WATERMARK)

    def process(self, element, total=beam.DoFn.StateParam(TOTAL),
                flush=beam.DoFn.TimerParam(FLUSH)):
      total.write((total.read() or 0) + element[1])
      flush.set(beam.transforms.window.GlobalWindow().max_timestamp())

    @userstate.on_timer(FLUSH)
    def on_flush(self, total=beam.DoFn.StateParam(TOTAL)):
      yield total.read()

  plain, stateful = beam.Map(len).fn, Stateful()
  expected = {id(fn): beams(fn) for fn in (plain, stateful)}
  assert expected[id(plain)] == (set(), set())
  assert ({s.name for s in expected[id(stateful)][0]},
          {t.name for t in expected[id(stateful)][1]}) == ({"total"}, {"ts-flush"})
  inspected, counting = _counting_inspections(monkeypatch)
  with beam_io.introspect_once():
    assert userstate.get_dofn_specs is not counting
    with beam_io.introspect_once():  # nested
      for _ in range(3):
        for fn in (plain, stateful):
          specs = userstate.get_dofn_specs(fn)
          assert specs == expected[id(fn)]
          specs[0].add("mutated")  # new sets each call, as Beam's
    assert userstate.is_stateful_dofn(stateful) and not userstate.is_stateful_dofn(plain)
    assert inspected == [plain, stateful]
    with beam.Pipeline(options=beam_io.default_pipeline_options([])) as p:
      totals = p | beam.Create([("a", 1), ("a", 2), ("b", 5)]) | beam.ParDo(Stateful())
      util.assert_that(totals, util.equal_to([3, 5]))
  assert userstate.get_dofn_specs is counting  # what was in place, back
  with pytest.raises(RuntimeError, match="boom"):
    with beam_io.introspect_once():
      raise RuntimeError("boom")
  assert userstate.get_dofn_specs is counting
  before = len(inspected)
  userstate.get_dofn_specs(plain)
  userstate.get_dofn_specs(plain)
  assert len(inspected) == before + 2  # outside the context: inspected at every call


_TOTAL = userstate.ReadModifyWriteStateSpec("total", VarIntCoder())


class _Holder:

  def add(self, element, total=beam.DoFn.StateParam(_TOTAL)):
    total.write((total.read() or 0) + element[1])


class _PlainDoFn(beam.DoFn):

  def process(self, element):
    yield element


class _StatefulDoFn(beam.DoFn):

  def process(self, element, total=beam.DoFn.StateParam(_TOTAL)):
    total.write((total.read() or 0) + element[1])


def test_dofns_of_one_class_share_an_inspection_unless_their_attributes_change_it(monkeypatch):
  """The runner unpickles a new DoFn object for each stage it runs (issue 17: the 7 English
  dumps' extraction inspected DoFns 151 times, 11 when kept per class); a copy or another
  DoFn of the same module-level class is inspected once (beam.Map wraps every callable in a
  function of its own), but one whose instance holds a bound method with a state parameter,
  a type-check wrapper (whose hooks read the instance) and the DoFns of a class that
  unpickling rebuilds by value (a local class: new functions, new timer callbacks) get their
  own answer, Beam's."""
  beams = userstate.get_dofn_specs

  class LocalStateful(beam.DoFn):

    def process(self, element, total=beam.DoFn.StateParam(_TOTAL)):
      total.write((total.read() or 0) + element[1])

  with_state = _PlainDoFn()
  with_state.process = _Holder().add  # Beam now sees a state parameter on this one
  stateful, local = _StatefulDoFn(), LocalStateful()
  dofns = {"len": beam.Map(len).fn, "str": beam.Map(str).fn,
           "map of a method": beam.Map(_Holder().add).fn,
           "pack": beam_io.PackByKey(), "pack copy": pickler.loads(pickler.dumps(
               beam_io.PackByKey())),
           "plain": _PlainDoFn(), "plain 2": _PlainDoFn(), "with state": with_state,
           "stateful": stateful, "stateful copy": pickler.loads(pickler.dumps(stateful)),
           "local": local, "local copy": pickler.loads(pickler.dumps(local)),  # as the runner
           "checked plain": typecheck.TypeCheckWrapperDoFn(_PlainDoFn(), _PlainDoFn(
           ).get_type_hints()),
           "checked stateful": typecheck.TypeCheckWrapperDoFn(stateful,
                                                              stateful.get_type_hints())}
  expected = {name: beams(fn) for name, fn in dofns.items()}
  with_total = {name for name, (states, _) in expected.items()
                if [s.name for s in states] == ["total"]}
  assert with_total == {"with state", "stateful", "stateful copy", "local", "local copy",
                        "checked stateful"}
  assert not any(timers for _, timers in expected.values())
  inspected, _ = _counting_inspections(monkeypatch)
  with beam_io.introspect_once():
    for _ in range(2):
      for name, fn in dofns.items():
        states, _ = userstate.get_dofn_specs(fn)
        assert {s.name for s in states} == {s.name for s in expected[name][0]}, name
    names = {id(fn): name for name, fn in dofns.items()}
    assert [names[id(fn)] for fn in inspected] == [
        "len", "pack", "plain", "with state", "stateful", "local", "local copy",
        "checked plain", "checked stateful"]


class _PropertyDoFn(beam.DoFn):
  """`process` a property: a stateful bound method or a plain one, by an instance flag."""

  def __init__(self, stateful: bool):
    super().__init__()
    self.stateful = stateful

  @property
  def process(self):
    return _Holder().add if self.stateful else self.plain

  def plain(self, element):
    yield element


class _SlotDoFn(beam.DoFn):
  """`process` held in a slot (not in the instance's __dict__)."""
  __slots__ = ("process",)


def test_dofns_whose_methods_come_from_the_instance_get_their_own_answer():
  """From a fault a checking helper found in the per-class key: a DoFn whose `process` is a
  property reading the instance, a slot, or an instance-level `_inspect_process` hook got the
  answer of the first DoFn of its class inspected, and a pipeline that runs without
  introspect_once failed inside it. Each of these, and a DoFn of a class rebuilt by value
  (unpickled again: new functions, new spec objects) asked again, gets Beam's answer, the
  same spec objects."""
  beams = userstate.get_dofn_specs
  slot_stateful, slot_plain = _SlotDoFn(), _SlotDoFn()
  slot_stateful.process = _Holder().add
  slot_plain.process = _PlainDoFn().process
  hooked = _PlainDoFn()
  hooked._inspect_process = lambda: (["element", "total"], [beam.DoFn.StateParam(_TOTAL)])

  class LocalStateful(beam.DoFn):

    def process(self, element, total=beam.DoFn.StateParam(_TOTAL)):
      total.write((total.read() or 0) + element[1])

  local = LocalStateful()
  dofns = {"property plain": _PropertyDoFn(False), "property stateful": _PropertyDoFn(True),
           "slot stateful": slot_stateful, "slot plain": slot_plain,
           "plain": _PlainDoFn(), "hooked": hooked, "local": local}
  stateful = {name for name, fn in dofns.items() if beams(fn)[0]}
  assert stateful == {"property stateful", "slot stateful", "hooked", "local"}
  with beam_io.introspect_once():
    for _ in range(2):
      for name, fn in dofns.items():
        assert userstate.get_dofn_specs(fn) == beams(fn), name
      pickler.loads(pickler.dumps(local))  # LocalStateful rebuilt in place: new spec objects
    with beam.Pipeline(options=beam_io.default_pipeline_options([])) as p:
      for name, fn in dofns.items():
        if name != "hooked":  # its hook is no real parameter list
          _ = (p | f"Create {name}" >> beam.Create([("a", 1), ("a", 2)])
               | f"Run {name}" >> beam.ParDo(fn))


def test_each_options_view_is_built_once_inside_the_context_and_shares_the_values():
  """Beam builds a view of the options (an argparse parser) twice for every transform applied
  (issue 17: 506 calls, 0.13 s of a 0.63 s extraction of 3 pages); inside introspect_once
  each options object's view of a class is built once, reads and writes through it reach the
  options as through a new view, and Beam's method is back when the context closes."""
  # pylint: disable=g-import-not-at-top
  from apache_beam.options.pipeline_options import PipelineOptions
  from apache_beam.options.pipeline_options import SetupOptions
  # pylint: enable=g-import-not-at-top
  beams = PipelineOptions.view_as
  options = beam_io.default_pipeline_options(["--direct_num_workers=3"])
  other = beam_io.default_pipeline_options([])
  with beam_io.introspect_once():
    assert PipelineOptions.view_as is not beams
    direct = options.view_as(DirectOptions)
    assert direct is options.view_as(DirectOptions)  # built once
    assert direct is not other.view_as(DirectOptions)  # per options object
    assert direct.direct_num_workers == 3 and other.view_as(DirectOptions).direct_num_workers == 1
    options.view_as(SetupOptions).save_main_session = True  # a write through another view
    assert options.get_all_options()["save_main_session"] is True
    direct.direct_num_workers = 5
    assert options.view_as(DirectOptions).direct_num_workers == 5
  assert PipelineOptions.view_as is beams
  assert options.view_as(DirectOptions) is not options.view_as(DirectOptions)
  assert options.view_as(DirectOptions).direct_num_workers == 5
  assert options.view_as(SetupOptions).save_main_session is True


# --- flags that are neither the entry point's nor Beam's (issue 14, item 2) ------------------

OWN_FLAGS = ["input", "output_dir", "titles", "redirects_tsv", "descriptions"]


@pytest.mark.parametrize("args", [
    ["--runner=DataflowRunner", "--project=my-project", "--region", "europe-west1",
     "--temp_location=gs://bucket/tmp", "--staging_location=gs://bucket/staging",
     "--num_workers=4", "--max_num_workers=8", "--machine_type=n2-standard-4",
     "--experiments=use_runner_v2", "--sdk_container_image=img", "--save_main_session",
     "--setup_file=./setup.py", "--job_name=extract"],
    ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    ["--runner=FlinkRunner", "--flink_master=localhost:8081", "--environment_type=LOOPBACK"],
    [],
])
def test_beam_pipeline_options_pass(args):
  beam_io.check_pipeline_args(args, OWN_FLAGS)
  beam_io.default_pipeline_options(args, OWN_FLAGS)


@pytest.mark.parametrize("args, message", [
    (["--title=titles.txt.gz"], r"unknown flag\(s\) --title \(did you mean --titles\?\)"),
    (["--title", "titles.txt.gz"], r"--title \(did you mean --titles\?\)"),
    (["--redirects=r.tsv"], r"--redirects \(did you mean --redirects_tsv\?\)"),
    (["--runer=DataflowRunner"], r"--runer \(did you mean --runner\?\)"),
    (["--direct_num_worker=2"], r"did you mean --direct_num_workers\?"),
    (["--runner=DirectRunner", "--zzz_unheard_of=1"], r"unknown flag\(s\) --zzz_unheard_of:"),
    (["dump.xml.bz2"], r"unexpected argument\(s\) dump.xml.bz2"),
    # A known option with a value it does not take: argparse's words, not its usage and exit.
    (["--direct_running_mode=bogus"],
     r"bad Beam pipeline option: argument --direct_running_mode: invalid choice: 'bogus'"),
    (["--direct_running_mode"], r"--direct_running_mode: expected one argument"),
    (["--direct_num_workers=two"], r"--direct_num_workers: invalid int value: 'two'"),
])
def test_misspelt_flags_are_errors_naming_them(args, message):
  with pytest.raises(ValueError, match=message):
    beam_io.default_pipeline_options(args, OWN_FLAGS)


def _packs(fn, elements):
  """Runs a PackByKey DoFn over one bundle; returns its packs in the order sent."""
  fn.start_bundle()
  out = [p for e in elements for p in fn.process(e)]
  return out + [w.value for w in fn.finish_bundle()]


def test_pack_by_key_bounds_each_pack_and_keeps_every_value():
  """Issue 17: values cross a shuffle in packs of one key, never more than max_values or
  max_bytes (a key with many values is several packs), none lost."""
  elements = [("a", "x" * 10)] * 5 + [("b", "y")] + [("a", "z")]
  packs = _packs(beam_io.PackByKey(max_values=2, max_bytes=0), elements)
  assert [(k, len(v)) for k, v in packs] == [("a", 2), ("a", 2), ("a", 2), ("b", 1)]
  assert sorted(x for _, v in packs for x in v) == sorted(v for _, v in elements)
  # 25 bytes held in the bundle's packs send them all: after the third 10-byte value; the
  # rest (20 + 1 + 1 bytes) at the end of the bundle.
  packs = _packs(beam_io.PackByKey(max_values=100, max_bytes=25, size_of=len), elements)
  assert [(k, len(v)) for k, v in packs] == [("a", 3), ("a", 3), ("b", 1)]
  assert sum(len(v) for _, v in packs) == len(elements)
  # Both bounds: a pack completed by its count gives its bytes back (10 + 10 each time), so
  # the 35 bytes are never held and only the count and the bundle's end cut packs.
  packs = _packs(beam_io.PackByKey(max_values=2, max_bytes=35, size_of=len), elements)
  assert [(k, len(v)) for k, v in packs] == [("a", 2), ("a", 2), ("a", 2), ("b", 1)]


def test_packs_hand_over_what_they_hold_once():
  packs = beam_io.Packs(max_values=3, max_bytes=0)
  assert packs.add("a", 1) == [] and packs.add("b", 2) == [] and packs.add("a", 3) == []
  assert packs.add("a", 4) == [("a", [1, 3, 4])]
  assert packs.take() == [("b", [2])]
  assert packs.take() == []


def test_packs_add_all_completes_the_packs_that_adding_one_by_one_completes():
  """add_all(key, values) returns what add() of each value returns, together, and leaves the
  same packs held: by the count, by the bytes held (the value that reaches max_bytes hands
  over every pack), with and without sizes."""
  import random  # pylint: disable=g-import-not-at-top
  rng = random.Random(17)
  for max_values, max_bytes, size_of in ((3, 0, None), (4, 0, len), (5, 12, len),
                                         (1, 0, None), (100, 7, len), (2, 1, len)):
    one, bulk = (beam_io.Packs(max_values, max_bytes, size_of) for _ in range(2))
    for _ in range(60):
      key = rng.choice("ab")
      values = ["v" * rng.randint(0, 5) for _ in range(rng.randint(0, 9))]
      expected = [done for value in values for done in one.add(key, value)]
      assert bulk.add_all(key, values) == expected, (max_values, max_bytes)
    assert bulk.take() == one.take()


def _is_collectable(obj) -> bool:
  """Whether the cyclic collector can reach `obj` (in one of its generations, not frozen)."""
  import gc  # pylint: disable=g-import-not-at-top
  return any(o is obj for o in gc.get_objects())


def test_packs_freeze_full_moves_the_objects_alive_out_of_the_collectors_reach():
  """With freeze_full, completing a pack (by its count or by the bytes held) freezes every
  object alive first; adding to a pack does not; without freeze_full nothing is frozen. The
  values and packs are those of plain Packs."""
  import gc  # pylint: disable=g-import-not-at-top
  packs = beam_io.Packs(max_values=3, max_bytes=0, freeze_full=True)
  marker = [object()]  # a new container: in the youngest generation
  frozen = gc.get_freeze_count()
  assert packs.add("a", 1) == [] and packs.add("b", 2) == [] and packs.add("a", 3) == []
  assert gc.get_freeze_count() == frozen and _is_collectable(marker)
  assert packs.add("a", 4) == [("a", [1, 3, 4])]
  assert gc.get_freeze_count() > frozen and not _is_collectable(marker)
  assert packs.take() == [("b", [2])]
  # By the bytes held: the value that reaches max_bytes hands over all packs.
  packs = beam_io.Packs(max_values=100, max_bytes=10, size_of=len, freeze_full=True)
  marker = [object()]
  assert packs.add("a", "x" * 4) == [] and _is_collectable(marker)
  assert packs.add("b", "y" * 6) == [("a", ["xxxx"]), ("b", ["yyyyyy"])]
  assert not _is_collectable(marker)
  # Without it: the same packs, nothing frozen.
  plain = beam_io.Packs(max_values=3, max_bytes=0)
  marker = [object()]
  frozen = gc.get_freeze_count()
  assert [plain.add("a", v) for v in (1, 2, 3)] == [[], [], [("a", [1, 2, 3])]]
  assert gc.get_freeze_count() == frozen and _is_collectable(marker)


def test_packing_steps_relax_the_garbage_collector():
  """The packing DoFns' setup sets the cyclic collector's thresholds (a process-wide setting;
  restored here for the tests after this one)."""
  import gc  # pylint: disable=g-import-not-at-top
  before = gc.get_threshold()
  try:
    gc.set_threshold(700, 10, 10)
    beam_io.PackByKey().setup()
    assert gc.get_threshold() == beam_io.GC_THRESHOLDS == (100_000, 50, 1000)
  finally:
    gc.set_threshold(*before)


def test_packed_rows_give_the_same_text_file(tmp_path):
  """WriteTextFile(packed=True) on lists of rows writes the file it writes from the rows one
  by one (sorted), and an empty input still writes an empty file."""
  # pylint: disable=g-import-not-at-top
  import apache_beam as beam
  from apache_beam.testing import test_pipeline
  # pylint: enable=g-import-not-at-top
  rows = [("b", "B", 2), ("a", "Ä", 10), ("a", "A", 1), ("c", "C", 3)]
  with test_pipeline.TestPipeline() as p:
    _ = (p | "Rows" >> beam.Create(rows)
         | "WriteRows" >> beam_io.WriteTextFile(str(tmp_path / "rows.tsv")))
    _ = (p | "Packs" >> beam.Create([rows[:1], [], rows[1:]])
         | "WritePacks" >> beam_io.WriteTextFile(str(tmp_path / "packs.tsv"), packed=True))
    _ = (p | "NoPacks" >> beam.Create([rows]) | beam.Filter(lambda pack: False)
         | "WriteNone" >> beam_io.WriteTextFile(str(tmp_path / "none.tsv"), packed=True))
  expected = "a\tA\t1\na\tÄ\t10\nb\tB\t2\nc\tC\t3\n"
  assert (tmp_path / "rows.tsv").read_text(encoding="utf-8") == expected
  assert (tmp_path / "packs.tsv").read_text(encoding="utf-8") == expected
  assert (tmp_path / "none.tsv").read_text(encoding="utf-8") == ""


def test_tfrecord_frame_is_tensorflows_framing(tmp_path):
  records = [b"", b"x", b"\x00\xff" * 70_000, "Ünïcode".encode("utf-8")]
  path = str(tmp_path / "tf.tfrecord")
  with tf.io.TFRecordWriter(path) as writer:
    for record in records:
      writer.write(record)
  with open(path, "rb") as f:
    theirs = f.read()
  assert b"".join(beam_io.tfrecord_frame(r) for r in records) == theirs
  # In chunks (a chunk ends once it holds 10 bytes of records): the same bytes, the records
  # whole in each chunk.
  chunks = list(beam_io.tfrecord_chunks(records * 2, chunk_bytes=10))
  assert b"".join(chunks) == theirs * 2
  # Frames: 16 bytes more than the record (b"": 16, b"x": 17, 140,000 bytes, 'Ünïcode': 25).
  assert [len(c) for c in chunks] == [16 + 17 + 140_016, 25 + 16 + 17, 140_016, 25]
  assert list(beam_io.tfrecord_chunks([])) == []
  ours = tmp_path / "ours.tfrecord"
  ours.write_bytes(b"".join(beam_io.tfrecord_frame(r) for r in records))
  assert [r.numpy() for r in tf.data.TFRecordDataset(str(ours))] == records


def test_packed_records_give_the_same_shard_files(tmp_path):
  """WriteShardedTFRecords(packed=True) on lists of records writes the files it writes from
  the records one by one: same shards, same order, same bytes (records_per_shard 3 of 10
  records: 4 shards; and one shard, where the packs go on as they are), and an empty input
  still writes its shard."""
  # pylint: disable=g-import-not-at-top
  import apache_beam as beam
  from apache_beam.testing import test_pipeline
  # pylint: enable=g-import-not-at-top
  records = [(f"{i}:{i * 7 % 5}", f"record {i}".encode()) for i in range(10)]
  packs = [records[:4], records[4:5], records[5:]]
  with test_pipeline.TestPipeline() as p:
    _ = (p | "One" >> beam.Create(records)
         | "WriteOne" >> beam_io.WriteShardedTFRecords(str(tmp_path / "one"),
                                                       records_per_shard=3))
    _ = (p | "Packs" >> beam.Create(packs)
         | "WritePacks" >> beam_io.WriteShardedTFRecords(str(tmp_path / "packed"),
                                                         records_per_shard=3, packed=True))
    _ = (p | "OneShard" >> beam.Create(records)
         | "WriteOneShard" >> beam_io.WriteShardedTFRecords(str(tmp_path / "single")))
    _ = (p | "PacksOneShard" >> beam.Create(packs)
         | "WritePacksOneShard" >> beam_io.WriteShardedTFRecords(str(tmp_path / "psingle"),
                                                                 packed=True))
    _ = (p | "NoPacks" >> beam.Create([[("k", b"v")]]) | beam.Filter(lambda pack: False)
         | "WriteNone" >> beam_io.WriteShardedTFRecords(str(tmp_path / "none"), packed=True))
  one = sorted(f.name for f in tmp_path.glob("one-*"))
  assert len(one) == 4
  for name in one:
    assert (tmp_path / name).read_bytes() == (tmp_path / name.replace("one", "packed")).read_bytes()
  assert sum(1 for name in one for _ in tf.data.TFRecordDataset(str(tmp_path / name))) == 10
  assert [f.name for f in tmp_path.glob("none-*")] == ["none-00000-of-00001.tfrecord"]
  single = tmp_path / "single-00000-of-00001.tfrecord"
  assert single.read_bytes() == (tmp_path / "psingle-00000-of-00001.tfrecord").read_bytes()
  assert [r.numpy() for r in tf.data.TFRecordDataset(str(single))] == [
      value for _, value in sorted(records)]


_WRITE_CASES = {"count": dict(records_per_shard=3), "one": {}, "fixed": dict(num_shards=6)}
_WRITE_FORMS = ("records", "packs", "none")


def _write_every_way(p, tmp_path, background=False):
  """WriteShardedTFRecords of the same records sharded and gathered (with `background`), for
  _check_every_way: packed or not, sized by count (4 shards of 3, one shard) or fixed (6
  shards, some empty), and an empty input; each transform's listing written to list-LABEL."""
  records = [(f"{i}:{i * 7 % 5}", f"record {i}".encode()) for i in range(10)] + [
      ("0:0", b"a second record of key 0:0")]
  packs = [records[:4], records[4:5], records[5:]]
  inputs = {"records": p | "Records" >> beam.Create(records),
            "packs": p | "Packs" >> beam.Create(packs),
            "none": (p | "NoPacks" >> beam.Create([[("k", b"v")]])
                     | beam.Filter(lambda pack: False))}
  for case, kwargs in _WRITE_CASES.items():
    for form in _WRITE_FORMS:
      for gathered in (False, True):
        label = f"{case}_{form}_{'gathered' if gathered else 'sharded'}"
        listed = inputs[form] | label >> beam_io.WriteShardedTFRecords(
            str(tmp_path / label), packed=form != "records", gathered=gathered,
            background=background and gathered, **kwargs)
        _ = (listed | f"Names_{label}" >> beam.Map(
            lambda pc, label=label: (os.path.basename(pc[0]).replace(label, "X"), pc[1]))
             | f"Listing_{label}" >> beam.io.WriteToText(str(tmp_path / f"list-{label}"),
                                                         shard_name_template=""))


def _check_every_way(tmp_path):
  """The gathered writes of _write_every_way wrote the sharded ones' files, byte for byte, and
  listed the same (path, count) pairs; an empty input's shard (or all fixed shards) written."""
  for case in _WRITE_CASES:
    for form in _WRITE_FORMS:
      sharded, gathered = (f"{case}_{form}_{kind}" for kind in ("sharded", "gathered"))
      files = sorted(f.name for f in tmp_path.glob(f"{sharded}-*"))
      assert files == sorted(f.name.replace(gathered, sharded)
                             for f in tmp_path.glob(f"{gathered}-*")), (case, form)
      assert len(files) == {"count": 4 if form != "none" else 1, "one": 1, "fixed": 6}[case]
      for name in files:
        assert ((tmp_path / name).read_bytes()
                == (tmp_path / name.replace(sharded, gathered)).read_bytes()), name
      listings = [sorted((tmp_path / f"list-{label}").read_text().splitlines())
                  for label in (sharded, gathered)]
      assert listings[0] == listings[1] and len(listings[0]) == len(files)


def test_gathered_writes_give_the_same_shard_files_and_listing(tmp_path):
  """WriteShardedTFRecords(gathered=True) (one stage, for the local runner in memory) writes
  the files and lists the (path, count) pairs that the sharded steps do."""
  # pylint: disable=g-import-not-at-top
  from apache_beam.testing import test_pipeline
  # pylint: enable=g-import-not-at-top
  with test_pipeline.TestPipeline() as p:
    _write_every_way(p, tmp_path)
  _check_every_way(tmp_path)


def test_gathered_writes_of_run_pipeline_in_forked_processes_give_the_same_files(
    tmp_path, monkeypatch):
  """Run by run_pipeline on the local runner in memory, the gathered writes with
  background=True hand their shards to forked processes (fork_write): the same files and
  listings as the sharded steps, every file complete when run_pipeline returns and every
  process reaped."""
  forked = []
  fork = os.fork

  def counted_fork():
    pid = fork()
    if pid:
      forked.append(pid)
    return pid

  monkeypatch.setattr(os, "fork", counted_fork)
  pipeline = beam.Pipeline(options=beam_io.default_pipeline_options([]))
  _write_every_way(pipeline, tmp_path, background=True)
  beam_io.run_pipeline(pipeline)
  # One fork per gathered write that had records: 3 cases x records and packs.
  assert len(forked) == 6
  for pid in forked:
    with pytest.raises(ChildProcessError):
      os.waitpid(pid, os.WNOHANG)
  _check_every_way(tmp_path)


def test_a_failed_forked_write_fails_run_pipeline_naming_its_file(tmp_path):
  """A forked write that fails (its directory cannot be made: a file is in the way) fails
  run_pipeline with the file's name and the child's error, not a run that looks finished."""
  blocker = tmp_path / "a_file"
  blocker.write_text("in the way")
  pipeline = beam.Pipeline(options=beam_io.default_pipeline_options([]))
  _ = (pipeline | beam.Create([[("a", b"A"), ("b", b"B")]])
       | beam_io.WriteShardedTFRecords(str(blocker / "out"), packed=True, gathered=True,
                                       background=True))
  with pytest.raises(RuntimeError, match=r"forked process failed: .*a_file/out-00000-of-00001"
                                         r"\.tfrecord: \w+Error"):
    beam_io.run_pipeline(pipeline)


def test_background_writes_kill_and_reap_their_processes_when_the_run_fails(tmp_path):
  """An exception inside background_writes kills the writes still running (no process goes on
  writing into a directory that the caller removes) and reaps them; outside the context, for
  a run of another id, or for a file that is not local, fork_write forks nothing."""
  started = time.monotonic()
  with pytest.raises(KeyError, match="the run failed"):
    with beam_io.background_writes("run-1"):
      assert beam_io.fork_write("run-1", [str(tmp_path / "slow")], lambda: time.sleep(60))
      pid = beam_io._BACKGROUND_WRITES["run-1"][1][0].pid  # pylint: disable=protected-access
      raise KeyError("the run failed")
  assert time.monotonic() - started < 30
  with pytest.raises(ChildProcessError):
    os.waitpid(pid, os.WNOHANG)
  assert "run-1" not in beam_io._BACKGROUND_WRITES  # pylint: disable=protected-access
  never = lambda: pytest.fail("forked")  # pylint: disable=unnecessary-lambda-assignment
  assert not beam_io.fork_write("run-1", [str(tmp_path / "x")], never)
  with beam_io.background_writes("run-2"):
    assert not beam_io.fork_write("run-1", [str(tmp_path / "x")], never)
    assert not beam_io.fork_write("run-2", ["gs://bucket/x"], never)
  with pytest.raises(RuntimeError, match=r"y: ValueError: bad record; .*z: the writing "
                                         r"process exited with status -9"):
    with beam_io.background_writes("run-3"):
      assert beam_io.fork_write("run-3", [str(tmp_path / "y")], _raise_bad_record)
      assert beam_io.fork_write("run-3", [str(tmp_path / "z")],
                                lambda: os.kill(os.getpid(), signal.SIGKILL))


def _raise_bad_record():
  raise ValueError("bad record")


def test_gathered_writes_without_background_have_their_files_when_listed(tmp_path,
                                                                          monkeypatch):
  """Without background=True a gathered writer run by run_pipeline forks nothing and each
  file is complete when its listing comes out: a later step of the run reads it whole."""
  monkeypatch.setattr(os, "fork", lambda: pytest.fail("forked"))
  records = [(f"k{i}", f"record {i}".encode()) for i in range(7)]
  pipeline = beam.Pipeline(options=beam_io.default_pipeline_options([]))
  read_back = tmp_path / "read_back.txt"
  _ = (pipeline | beam.Create([records])
       | beam_io.WriteShardedTFRecords(str(tmp_path / "out"), packed=True, gathered=True,
                                       records_per_shard=3)
       | beam.Map(lambda listed: (listed[1], len(list(
           tf.data.TFRecordDataset(listed[0]).as_numpy_iterator()))))
       | beam.Map(lambda counts: f"{counts[0]} {counts[1]}")
       | beam.io.WriteToText(str(read_back), shard_name_template=""))
  beam_io.run_pipeline(pipeline)
  lines = read_back.read_text().split()
  assert len(lines) == 6 and lines[0::2] == lines[1::2] and sum(map(int, lines[0::2])) == 7


def _stuck_write():
  time.sleep(60)


def test_an_interrupt_while_background_writes_wait_kills_and_reaps_them(tmp_path):
  """An exception that reaches the final wait (a signal handler's, as Ctrl-C's
  KeyboardInterrupt) kills and reaps the writes not yet waited for, and goes on: no child
  left writing, none left unreaped."""
  def interrupt(signum, frame):
    raise KeyError("interrupted")

  previous = signal.signal(signal.SIGALRM, interrupt)
  try:
    with pytest.raises(KeyError, match="interrupted"):
      with beam_io.background_writes("run-wait"):
        for name in ("a", "b"):
          assert beam_io.fork_write("run-wait", [str(tmp_path / name)], _stuck_write)
        writes = beam_io._BACKGROUND_WRITES["run-wait"][1]  # pylint: disable=protected-access
        pids = [write.pid for write in writes]
        signal.setitimer(signal.ITIMER_REAL, 0.5)
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)
  for pid in pids:
    with pytest.raises(ChildProcessError):
      os.waitpid(pid, os.WNOHANG)


def test_no_fork_while_sigchld_is_ignored(tmp_path, monkeypatch):
  """With SIGCHLD ignored (a supervisor may start the process so) the kernel reaps children
  and waitpid waits for all of them: fork_write then forks nothing (the step writes)."""
  monkeypatch.setattr(os, "fork", lambda: pytest.fail("forked"))
  previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
  try:
    with beam_io.background_writes("run-ign"):
      assert not beam_io.fork_write("run-ign", [str(tmp_path / "x")], _stuck_write)
  finally:
    signal.signal(signal.SIGCHLD, previous)


def test_a_forked_write_dies_with_the_process_that_forked_it(tmp_path):
  """A writer whose parent is killed (SIGKILL: no cleanup runs) dies too (PR_SET_PDEATHSIG),
  so no orphan goes on writing into a staging directory that a rerun removes."""
  pid_file = tmp_path / "writer.pid"

  def write():
    pid_file.write_text(str(os.getpid()))
    time.sleep(60)
    (tmp_path / "written").write_text("an orphan wrote this")

  parent = os.fork()
  if parent == 0:
    try:
      with beam_io.background_writes("run-orphan"):
        beam_io.fork_write("run-orphan", [str(tmp_path / "written")], write)
        time.sleep(60)
    finally:
      os._exit(1)  # pylint: disable=protected-access
  deadline = time.monotonic() + 30
  while not pid_file.exists() or not pid_file.read_text():
    assert time.monotonic() < deadline
    time.sleep(0.05)
  writer = int(pid_file.read_text())
  os.kill(parent, signal.SIGKILL)
  os.waitpid(parent, 0)
  while _alive(writer):
    assert time.monotonic() < deadline, "the writer outlived its parent"
    time.sleep(0.05)
  assert not (tmp_path / "written").exists()


def _alive(pid: int) -> bool:
  """pid runs (neither gone nor a zombie that init has not reaped yet)."""
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except FileNotFoundError:
    return False


def test_every_shard_is_written_and_listed_when_records_leave_some_empty(tmp_path):
  """3 records into 6 shards: every shard file exists (the empty ones with no bytes), and the
  transform lists each file once with its record count."""
  # pylint: disable=g-import-not-at-top
  import apache_beam as beam
  from apache_beam.testing import test_pipeline
  from apache_beam.testing import util
  # pylint: enable=g-import-not-at-top
  records = [("a", b"A"), ("b", b"B"), ("c", b"C")]
  prefix = str(tmp_path / "few")
  shards = {beam_io.shard_of(key, 6) for key, _ in records}
  expected = [(f"{prefix}-{i:05d}-of-00006.tfrecord",
               sum(beam_io.shard_of(key, 6) == i for key, _ in records)) for i in range(6)]
  with test_pipeline.TestPipeline() as p:
    listed = (p | beam.Create([records])
              | beam_io.WriteShardedTFRecords(prefix, num_shards=6, packed=True))
    util.assert_that(listed, util.equal_to(expected))
  files = sorted(tmp_path.glob("few-*"))
  assert [f.name for f in files] == [f"few-{i:05d}-of-00006.tfrecord" for i in range(6)]
  assert [f.stat().st_size > 0 for f in files] == [i in shards for i in range(6)]
  assert sorted(r for f in files for r in tf.data.TFRecordDataset(str(f)).as_numpy_iterator()
                ) == [b"A", b"B", b"C"]


# The packs emitted by the steps of the by-reference test, by number, to compare identities.
_EMITTED = {}


_GOT = []


def _emit(n):
  pack = _EMITTED[n] = [("value", n)]
  return n % 2, pack


def _receive(group):
  key, packs = group
  _GOT.append((key, sorted((pack[0][1], pack is _EMITTED[pack[0][1]]) for pack in packs)))


def test_shuffled_values_pass_by_reference_on_the_local_runner_in_memory():
  """On Beam's Fn API runner in memory, the values of a Flatten of two stages' outputs and of
  a CountedGroupByKey after it pass by reference: the step after the shuffle gets the very
  objects emitted before it (coded, it would get copies), grouped by key, and the run leaves
  nothing in the store (each value read once). A runner in another mode keeps Beam's coders."""
  # pylint: disable=g-import-not-at-top
  import apache_beam as beam
  # pylint: enable=g-import-not-at-top
  pipeline = beam.Pipeline(options=beam_io.default_pipeline_options())
  assert beam_io.passes_by_reference(pipeline)
  left = pipeline | "Left" >> beam.Create([1, 2, 3]) | "L" >> beam.Map(_emit)
  right = pipeline | "Right" >> beam.Create([4]) | "R" >> beam.Map(_emit)
  flat = beam_io.by_reference(
      (beam_io.by_reference(left), beam_io.by_reference(right)) | beam.Flatten())
  _ = flat | beam_io.CountedGroupByKey("Test") | beam.Map(_receive)
  result, state = beam_io.run_pipeline(pipeline)
  assert state == beam.runners.runner.PipelineState.DONE
  assert sorted(_GOT) == [(0, [(2, True), (4, True)]), (1, [(1, True), (3, True)])]
  assert beam_io.flow_losses(beam_io.counters(result, beam_io.FLOW_NAMESPACE)) == []
  assert beam_io.release_by_reference(pipeline) == 0
  threaded = beam.Pipeline(options=beam_io.default_pipeline_options(
      ["--direct_running_mode=multi_threading"]))
  assert not beam_io.passes_by_reference(threaded)
  pcoll = threaded | beam.Create([(1, 2)])
  assert not isinstance(beam_io.by_reference(pcoll).element_type, beam_io.InProcessValue)


def test_spread_reshuffles_unless_one_worker_in_this_process_does_everything():
  """beam_io.spread: a Reshuffle where workers can share the elements (multi-threaded,
  multi-process, distributed runners); on the local runner in memory with one worker, where
  it would only add a stage, the same PCollection; the elements arrive either way."""
  # pylint: disable=g-import-not-at-top
  import apache_beam as beam
  from apache_beam.testing import util
  # pylint: enable=g-import-not-at-top
  for args, reshuffled in (([], False), (["--direct_running_mode=multi_threading"], True),
                           (["--direct_num_workers=2"], True)):
    with beam.Pipeline(options=beam_io.default_pipeline_options(args)) as pipeline:
      files = pipeline | beam.Create(["a", "b", "c"], reshuffle=False)
      spread = beam_io.spread(files, "SpreadFiles")
      assert (spread is not files) == reshuffled, args
      labels = []
      pipeline.visit(_LabelVisitor(labels))
      assert any(label.endswith("SpreadFiles") for label in labels) == reshuffled, args
      util.assert_that(spread | beam.Map(str.upper), util.equal_to(["A", "B", "C"]))


class _LabelVisitor:
  """Pipeline visitor that lists the full labels of the transforms (leaves and composites)."""

  def __init__(self, labels):
    self._labels = labels

  def enter_composite_transform(self, node):
    self._labels.append(node.full_label)

  def leave_composite_transform(self, node):
    pass

  def visit_transform(self, node):
    self._labels.append(node.full_label)

  def visit_value(self, value, producer_node):
    pass


def test_a_value_read_once_cannot_be_read_twice_and_a_kept_one_until_released():
  """InProcessCoder: read_once takes the value out (a second read is a RuntimeError naming
  the store, never another value); without it the value stays, the same object, until
  release_by_reference drops what is left."""
  # pylint: disable=g-import-not-at-top
  import apache_beam as beam
  # pylint: enable=g-import-not-at-top
  value = [("k", b"v")]
  once = beam_io.InProcessCoder("test-once")
  encoded = once.encode(value)
  assert len(encoded) <= 9  # an id, not the value
  assert once.decode(encoded) is value
  with pytest.raises(RuntimeError, match="test-once.*read before"):
    once.decode(encoded)
  pipeline = beam.Pipeline(options=beam_io.default_pipeline_options())
  kept = beam_io.by_reference(pipeline | beam.Create([value]), keyed=False, read_once=False)
  coder = beam.coders.registry.get_coder(kept.element_type)
  assert coder == beam_io.InProcessCoder(kept.element_type.store_id, read_once=False)
  encoded = coder.encode(value)
  assert coder.decode(encoded) is value and coder.decode(encoded) is value
  assert beam_io.release_by_reference(pipeline) == 1
  with pytest.raises(RuntimeError, match="released"):
    coder.decode(encoded)


def test_a_failed_run_releases_what_it_passed_by_reference():
  """A run that fails after its shuffle wrote values by reference leaves some of them unread
  (Beam's own run: the groups after the failing one); run_pipeline releases them."""
  # pylint: disable=g-import-not-at-top
  import apache_beam as beam
  # pylint: enable=g-import-not-at-top

  def fail(kv):
    raise ValueError(f"failing on {kv[0]}")

  def failing_pipeline():
    pipeline = beam.Pipeline(options=beam_io.default_pipeline_options())
    _ = (pipeline | beam.Create([(i % 3, [i]) for i in range(30)])
         | beam_io.CountedGroupByKey("Failing") | beam.Map(fail))
    return pipeline

  pipeline = failing_pipeline()
  with pytest.raises(Exception, match="failing on"):
    pipeline.run()
  assert beam_io.release_by_reference(pipeline) == 20  # the 2 groups not read, 10 values each
  pipeline = failing_pipeline()
  with pytest.raises(Exception, match="failing on"):
    beam_io.run_pipeline(pipeline)
  assert beam_io.release_by_reference(pipeline) == 0


def _worker_state(tag):
  import gc  # pylint: disable=g-import-not-at-top
  return tag, gc.get_threshold(), _WORKER_TAG


_WORKER_TAG = None


def _set_worker_tag(tag):
  global _WORKER_TAG
  _WORKER_TAG = tag


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_an_ordered_pool_sets_its_workers_up_then_gives_results_in_submission_order(
    start_method):
  pool = beam_io.OrderedPool(2, start_method, initializer=_set_worker_tag,
                             initargs=("set up",))
  try:
    for i in range(7):
      pool.submit(_worker_state, i)
    results = list(pool.results(wait_all=True))
  finally:
    pool.shutdown()
  assert results == [(i, beam_io.GC_THRESHOLDS, "set up") for i in range(7)]


def _worker_pid(_):
  return os.getpid()


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_an_ordered_pools_workers_die_with_the_process_that_made_it(tmp_path, start_method):
  """A run killed outright (SIGKILL: no teardown shuts its pool down) leaves no worker behind:
  before, each waited forever on the pool's queue, whose write end its sibling holds."""
  pid_file = tmp_path / "workers"
  maker = os.fork()
  if maker == 0:
    try:
      pool = beam_io.OrderedPool(2, start_method)
      for i in range(4):
        pool.submit(_worker_pid, i)
      pids = sorted(set(pool.results(wait_all=True)))
      (tmp_path / "workers.tmp").write_text(" ".join(map(str, pids)))
      os.rename(tmp_path / "workers.tmp", pid_file)
      time.sleep(60)
    finally:
      os._exit(1)  # pylint: disable=protected-access
  deadline = time.monotonic() + 60
  while not pid_file.exists():
    assert time.monotonic() < deadline
    time.sleep(0.05)
  workers = [int(pid) for pid in pid_file.read_text().split()]
  assert workers and maker not in workers
  os.kill(maker, signal.SIGKILL)
  os.waitpid(maker, 0)
  while any(map(_alive, workers)):
    assert time.monotonic() < deadline, "a worker outlived the process that made its pool"
    time.sleep(0.05)


def test_a_step_with_no_worker_process_is_refused():
  from beam_pipelines.pipelines import kb_merge  # pylint: disable=g-import-not-at-top
  with pytest.raises(ValueError, match="processes must be at least 1, got 0"):
    kb_merge.BuildEntitiesFn(title_only_rules=True, processes=0)


def test_in_global_window_is_beams_windowed_value_in_the_global_window():
  """in_global_window shares one windows tuple instead of making a GlobalWindow a value: the
  same WindowedValue as GlobalWindows.windowed_value (value, timestamp, window, pane)."""
  # pylint: disable=g-import-not-at-top
  from apache_beam.transforms import window
  # pylint: enable=g-import-not-at-top
  for value in ((1, ["a"]), None, b"x"):
    ours, beams = beam_io.in_global_window(value), window.GlobalWindows.windowed_value(value)
    assert ours == beams
    assert (ours.value, ours.timestamp, ours.windows, ours.pane_info) == (
        beams.value, beams.timestamp, beams.windows, beams.pane_info)
    assert ours.windows[0] == window.GlobalWindow()


def test_sorted_records_is_the_pairs_sort_with_and_without_repeated_keys():
  """The shard writer sorts by key alone, then by the pairs only where a key repeats: the
  order of sorted() on the pairs either way (issue 17)."""
  import random  # pylint: disable=g-import-not-at-top
  rng = random.Random(5)
  for keys in (50, 5):  # distinct keys mostly; many repeats
    pairs = [(f"k{rng.randrange(keys)}", bytes([rng.randrange(256)]) * rng.randrange(1, 4))
             for _ in range(200)]
    unique = list({k: (k, r) for k, r in pairs}.values())
    for rows in (pairs, unique):
      packs = [rows[i:i + 7] for i in range(0, len(rows), 7)]
      assert beam_io.sorted_records(iter(packs)) == sorted(rows)
  assert beam_io.sorted_records([]) == [] and beam_io.sorted_records([[("a", b"")]]) == [("a", b"")]
