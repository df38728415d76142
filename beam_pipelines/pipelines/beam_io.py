"""Beam pieces shared by the pipelines: deterministic writers, pipeline options, counters."""

import argparse
import collections
import concurrent.futures
import contextlib
import ctypes
import difflib
import functools
import gc
import hashlib
import inspect
import itertools
import multiprocessing
import operator
import os
import signal
import struct
import sys
import threading
import types
import weakref
from typing import (Any, Callable, Dict, FrozenSet, Iterable, Iterator, List, NamedTuple,
                    Optional, Sequence, Tuple)

import apache_beam as beam
from apache_beam.coders import coder_impl
from apache_beam.coders import coders
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.localfilesystem import LocalFileSystem
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.options.pipeline_options import TypeOptions
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.runners.worker import statesampler
from apache_beam.transforms import userstate
from apache_beam.typehints import typehints
from apache_beam.utils import timestamp
from apache_beam.utils import windowed_value
import google_crc32c

# Shards are sized by record count when no number of shards is given (deterministic either way).
RECORDS_PER_SHARD = 200_000
# The runner when --runner is not given: Beam's local Fn API runner, the engine the
# DirectRunner runs batch pipelines on. The DirectRunner itself first tries its Prism
# runner, downloaded from GitHub on first use (offline: a failed download on every run
# before it falls back); --runner=DirectRunner, PrismRunner or DataflowRunner still apply.
LOCAL_RUNNER = "FnApiRunner"


def unknown_pipeline_args(args: Sequence[str]) -> Tuple[List[str], List[str]]:
  """The arguments that no Beam pipeline option takes, and every option string Beam knows.

  Beam's own parser decides: PipelineOptions.get_all_options builds one argument parser from
  every PipelineOptions subclass defined so far (standard, Google Cloud, worker, Direct,
  portable, Flink, Spark, Prism, ... options, and any a user module defines), and hands it to
  `add_extra_args_fn`; the same parser parses `args` here.

  Returns:
    (unknown arguments in order, e.g. ['--title=x'] or ['--title', 'x'], known option strings).

  Raises:
    ValueError: a known option with a value it does not take ('--direct_running_mode=bogus',
      a bare '--direct_running_mode'), in argparse's words, instead of argparse's exit with
      the usage of every Beam option (145 lines).
  """
  parsers = []
  PipelineOptions([]).get_all_options(add_extra_args_fn=parsers.append)
  parser = parsers[0]

  def refuse(message):
    raise ValueError(f"bad Beam pipeline option: {message}")

  parser.exit_on_error = False  # ArgumentError raised, not argparse's usage and exit
  parser.error = refuse  # the errors argparse reports without an ArgumentError
  try:
    _, unknown = parser.parse_known_args(list(args))
  except argparse.ArgumentError as e:
    refuse(str(e))
  actions = parser._actions  # pylint: disable=protected-access
  known = sorted({s for action in actions for s in action.option_strings})
  return unknown, known


def check_pipeline_args(args: Sequence[str], own_flags: Sequence[str] = ()) -> None:
  """Refuses arguments that are neither an entry point's flags nor Beam pipeline options.

  An entry point parses its own (absl) flags and passes the rest to Beam; Beam alone would
  drop an unknown '--title=x' with a log line and the job would run without the list meant by
  '--titles' (issue 14, item 2).

  Args:
    args: the arguments left after the entry point's flags, e.g. ['--runner=DataflowRunner'].
    own_flags: the entry point's flag names (without '--'), for 'did you mean' suggestions.

  Raises:
    ValueError: naming each unknown flag (with the closest known flag, when one is close) or
      stray argument.
  """
  unknown, known = unknown_pipeline_args(args)
  if not unknown:
    return
  names = known + [f"--{name}" for name in own_flags]
  flags_found = [a.split("=", 1)[0] for a in unknown if a.startswith("-") and a not in ("-", "--")]
  if not flags_found:
    raise ValueError(f"unexpected argument(s) {' '.join(unknown)}: every input is given by a "
                     "flag (see --help)")
  described = []
  for flag in flags_found:
    close = difflib.get_close_matches(flag, names, n=1)
    described.append(f"{flag} (did you mean {close[0]}?)" if close else flag)
  raise ValueError(f"unknown flag(s) {', '.join(described)}: neither this command's flags "
                   "(--help) nor Beam pipeline options")


# Turns Beam's construction-time type checks back on (default_pipeline_options).
TYPE_CHECK_FLAG = "--pipeline_type_check"


def default_pipeline_options(argv: Optional[Sequence[str]] = None,
                             own_flags: Sequence[str] = ()) -> PipelineOptions:
  """PipelineOptions from `argv`; the local runner (LOCAL_RUNNER), in-memory with one worker,
  and Beam's construction-time type checks off (pipeline_type_check), unless given.

  The type checks infer every step's output type from its Python bytecode when the pipeline is
  built; these pipelines declare no type hints, and the inference took 0.2 s of the
  extraction's 0.75 s of construction (issue 17). Without inferred types Beam moves elements
  between steps with its default coder for undeclared types (FastPrimitivesCoder), which ran
  as fast. `--pipeline_type_check` (a flag of this function's, Beam itself only has
  `--no_pipeline_type_check`) turns the checks back on.

  Raises:
    ValueError: an argument is no Beam pipeline option (check_pipeline_args; `own_flags` are
      the caller's flag names, for suggestions).
  """
  argv = list(argv or [])
  type_check = TYPE_CHECK_FLAG in argv
  argv = [a for a in argv if a != TYPE_CHECK_FLAG]
  check_pipeline_args(argv, list(own_flags) + [TYPE_CHECK_FLAG[2:]])
  options = PipelineOptions(argv)
  direct = options.view_as(DirectOptions)
  args = " ".join(argv)
  if "direct_num_workers" not in args:
    direct.direct_num_workers = 1
  if "direct_running_mode" not in args:
    direct.direct_running_mode = "in_memory"
  options.view_as(TypeOptions).pipeline_type_check = type_check
  standard = options.view_as(StandardOptions)
  if not standard.runner:
    standard.runner = LOCAL_RUNNER  # no Prism download (see LOCAL_RUNNER)
  return options


@contextlib.contextmanager
def _while_open(lock, opened: List[int], install: Callable[[], None],
                restore: Callable[[], None]) -> Iterator[None]:
  """install() when the first of the contexts counted in opened[0] opens, restore() when the
  last one closes (nested or across threads, under `lock`), however each one ends."""
  with lock:
    opened[0] += 1
    if opened[0] == 1:
      install()
  try:
    yield
  finally:
    with lock:
      opened[0] -= 1
      if opened[0] == 0:
        restore()


# The state sampler's period in bundles run in this process (brief_state_sampling), in ms.
BRIEF_SAMPLING_PERIOD_MS = 1
# Beam's class, as imported; brief_state_sampling swaps a subclass in and this back.
_BEAM_STATE_SAMPLER = statesampler.StateSampler
_SAMPLING_LOCK = threading.Lock()
_SAMPLING_OPEN = [0]  # contexts open (brief_state_sampling)


def _brief_sampler_class(period_ms: int):
  """A subclass of Beam's StateSampler whose period defaults to `period_ms`, or None where
  Beam's constructor takes no sampling_period_ms (another Beam version)."""
  try:
    parameters = inspect.signature(_BEAM_STATE_SAMPLER.__init__).parameters
  except (TypeError, ValueError):
    return None
  if "sampling_period_ms" not in parameters:
    return None

  class BriefStateSampler(_BEAM_STATE_SAMPLER):
    def __init__(self, prefix, counter_factory, sampling_period_ms=period_ms):
      super().__init__(prefix, counter_factory, sampling_period_ms=sampling_period_ms)

  return BriefStateSampler


@contextlib.contextmanager
def brief_state_sampling(period_ms: int = BRIEF_SAMPLING_PERIOD_MS) -> Iterator[None]:
  """Bundles processed in this process while the context is open sample their steps' time
  every `period_ms` ms instead of Beam's 200 ms (statesampler.DEFAULT_SAMPLING_PERIOD_MS).

  Each bundle that Beam's local runner processes in memory ends by joining its state
  sampler's thread (statesampler_fast.StateSampler.stop), which sleeps between samples for a
  period growing from 2 to 200 ms: up to 200 ms of waiting at the end of each of the
  extraction's ~40 bundles, 0.35-0.50 s of 6.4 s on the 7 English dumps (issue 17), and no
  pipeline option sets the period. The sampler's loop runs without the GIL, so a 1 ms period
  costs no measurable CPU; the steps' msecs counters are sampled at a finer grain.

  Swaps the StateSampler class that bundle_processor.BundleProcessor instantiates for a
  subclass with this period and restores Beam's when the last open context closes (contexts
  may nest, or overlap across threads: the first one's period holds). Bundles run in other
  processes (Beam's multi_processing mode, Dataflow) are not affected; with a Beam whose
  StateSampler takes no period, nothing is swapped.

  Raises:
    ValueError: `period_ms` below 1.
  """
  if period_ms < 1:
    raise ValueError(f"period_ms must be at least 1, got {period_ms}")

  def install():
    statesampler.StateSampler = _brief_sampler_class(period_ms) or _BEAM_STATE_SAMPLER

  def restore():
    statesampler.StateSampler = _BEAM_STATE_SAMPLER

  with _while_open(_SAMPLING_LOCK, _SAMPLING_OPEN, install, restore):
    yield


_INTROSPECT_LOCK = threading.RLock()
_INTROSPECT_OPEN = [0]  # contexts open (introspect_once)
# What introspect_once found in place (Beam's) and puts back when the last context closes.
_BEAM_GET_DOFN_SPECS = [userstate.get_dofn_specs]
_BEAM_VIEW_AS = [PipelineOptions.view_as]
# (kind, id(object), argument) -> (weak reference to the object, answer), while a context is
# open; an entry goes with its object.
_INTROSPECTED: Dict[Tuple[str, int, Any], Tuple[Any, Any]] = {}
_CALLABLE_WRAPPER_DOFN = beam.transforms.core.CallableWrapperDoFn


def _once(kind: str, obj, argument, compute):
  """compute() the first time (kind, obj, argument) is asked for while a context is open, the
  kept answer after that (obj by identity); an object that takes no weak reference is
  computed every time."""
  key = (kind, id(obj), argument)
  with _INTROSPECT_LOCK:
    entry = _INTROSPECTED.get(key)
  if entry is not None and entry[0]() is obj:
    return entry[1]
  answer = compute()
  try:
    ref = weakref.ref(obj, lambda _, key=key: _INTROSPECTED.pop(key, None))
  except TypeError:
    return answer
  with _INTROSPECT_LOCK:
    if _INTROSPECT_OPEN[0]:
      _INTROSPECTED[key] = (ref, answer)
  return answer


def _pickled_by_value_modules() -> FrozenSet[str]:
  """Modules registered with Beam's cloudpickle to be pickled by value (none by default)."""
  try:
    from apache_beam.internal.cloudpickle import cloudpickle  # pylint: disable=g-import-not-at-top
    return frozenset(cloudpickle.list_registry_pickle_by_value())
  except (ImportError, AttributeError):
    return frozenset()


def _pickled_by_reference(cls) -> bool:
  """Whether unpickling leaves `cls` as it is: an attribute of an imported module other than
  __main__, under its qualified name, and the module (or a package above it) not registered
  to be pickled by value, as cloudpickle decides. Beam's cloudpickle rebuilds any other class
  by value at each unpickling, into the same class object when there is one, with new
  functions set on it (so a DoFn's timer specs, which name their callback function, change
  with it). Asked at each call: a module reloaded or registered meanwhile changes it."""
  module = sys.modules.get(cls.__module__)
  name = getattr(module, "__name__", None)
  if name is None or name == "__main__":
    return False
  found = module
  for part in cls.__qualname__.split("."):
    found = getattr(found, part, None)
  if found is not cls:
    return False
  by_value = _pickled_by_value_modules()
  while name:
    if name in by_value:
      return False
    name = name.rpartition(".")[0]
  return True


# Beam's DoFn and its bases: their properties (_process_defined, ...) are never methods.
_DOFN_BASES = frozenset(beam.DoFn.__mro__)


def _class_shape(cls) -> Tuple[bool, bool]:
  """(whether what getattr finds on an instance of `cls` depends only on the class's and the
  instance's own dicts, whether the class has an `_inspect_` hook).

  Not so when the class looks attributes up in its own way (__getattribute__, __getattr__,
  __dir__) or holds a descriptor other than a function, classmethod or staticmethod (a
  property, a cached_property, a __slots__ member: they compute what they return from the
  instance) outside Beam's DoFn bases."""
  hooks = any(name.startswith("_inspect_") for name in dir(cls))
  if (cls.__getattribute__ is not object.__getattribute__ or cls.__dir__ is not object.__dir__
      or getattr(cls, "__getattr__", None) is not None):
    return False, hooks
  for klass in cls.__mro__:
    if klass in _DOFN_BASES:
      continue
    for name, value in vars(klass).items():
      if name in ("__dict__", "__weakref__") or isinstance(
          value, (types.FunctionType, classmethod, staticmethod)):
        continue
      if hasattr(type(value), "__get__"):
        return False, hooks
  return True, hooks


def _methods(dofn) -> Tuple[Tuple[str, Any], ...]:
  """(name, function) of each bound method found on the DoFn, as get_dofn_specs finds them."""
  methods = []
  for name in dir(dofn):
    method = getattr(dofn, name, None)
    if isinstance(method, types.MethodType):
      methods.append((name, method.__func__))
  return tuple(methods)


def _specs_key(dofn) -> Optional[Tuple[Any, Any]]:
  """(object, argument) that a DoFn's state and timer specs depend on, for _once; None when
  they are not to be kept.

  userstate.get_dofn_specs reads the parameter defaults of every bound method it finds on the
  DoFn (dir), through the `_inspect_<method>` hook where there is one. For a DoFn of a class
  that unpickling leaves as it is (_pickled_by_reference) and whose instances' attributes
  come from the class's and their own dicts (_class_shape), without hooks, the answer
  depends only on the class and on what the instance's own attributes change: the names that
  hide a class attribute, the function of each that holds a bound method; the key is those.
  Beam's CallableWrapperDoFn (beam.Map, FlatMap) has a hook that reads the wrapped callable,
  but it is not called while neither the instance's `process` nor its `_fn` is a bound
  method. Any other DoFn is keyed by the object and the functions of the methods found on it
  now (a class rebuilt by value has new ones). The runner unpickles a new DoFn object for
  every stage it runs, so answers kept per object served only the pipeline's construction
  (issue 17: the 7 English dumps' extraction inspected DoFns 151 times, 11 with this key). A
  class whose methods are replaced while the context is open is not seen to change.
  """
  cls = type(dofn)
  plain, hooks = _once("class", cls, None, lambda: _class_shape(cls))
  attributes = getattr(dofn, "__dict__", None)
  if (not plain or attributes is None or not _pickled_by_reference(cls)
      or any(name.startswith("_inspect_") for name in attributes)
      or hooks and (cls is not _CALLABLE_WRAPPER_DOFN or any(
          isinstance(attributes.get(name), types.MethodType) for name in ("process", "_fn")))):
    key = dofn, _methods(dofn)
  else:
    seen = []
    for name, value in attributes.items():
      if isinstance(value, types.MethodType):
        seen.append((name, value.__func__))
      elif hasattr(cls, name):
        seen.append((name, None))
    key = cls, tuple(seen)
  try:
    hash(key[1])
  except TypeError:  # a bound method of an unhashable callable
    return None
  return key


def _dofn_specs_once(dofn):
  key = _specs_key(dofn)
  compute = lambda: tuple(map(frozenset, _BEAM_GET_DOFN_SPECS[0](dofn)))
  state_specs, timer_specs = compute() if key is None else _once("specs", *key, compute)
  return set(state_specs), set(timer_specs)  # new sets each call, as Beam's


def _view_as_once(options, cls):
  return _once("view", options, cls, lambda: _BEAM_VIEW_AS[0](options, cls))


@contextlib.contextmanager
def introspect_once() -> Iterator[None]:
  """While the context is open, Beam asks each DoFn for its state and timer parameters once,
  and builds each view of a PipelineOptions object once, instead of at every step that asks.

  Each step of a pipeline costs Beam's local runner a fixed ~6 ms (issue 17), most of it
  introspection repeated for every step:
  - userstate.get_dofn_specs builds the signature (inspect.signature) of every method of the
    DoFn, DoFn's own ~30 included, and is called twice when a ParDo is made, twice when the
    pipeline is translated, once by the runner's keyed-input visit and twice when a stage's
    bundle processor is made: 824 calls, 0.36 s of the 1.0 s that the extraction took on a
    3-page dump. Its answer depends only on the methods' parameter defaults, fixed when the
    DoFn is made; here it is kept per DoFn object and handed out as new sets, as Beam's.
  - PipelineOptions.view_as builds an argparse parser of the view's options (Beam does so
    twice for every transform applied, for its type-check flag): 506 calls, 0.13 s. Views
    of one options object share its values (writes through any view reach all); here each
    view class's view is kept per options object.
  Answers are kept by object identity and go with their object. Contexts may nest, or
  overlap across threads; what was in place (Beam's functions) is restored, and everything
  kept is dropped, when the last one closes. Bundles run in other processes
  (multi_processing, Dataflow) are not affected.
  """

  def install():
    _BEAM_GET_DOFN_SPECS[0] = userstate.get_dofn_specs
    _BEAM_VIEW_AS[0] = PipelineOptions.view_as
    userstate.get_dofn_specs = _dofn_specs_once
    PipelineOptions.view_as = _view_as_once

  def restore():
    userstate.get_dofn_specs = _BEAM_GET_DOFN_SPECS[0]
    PipelineOptions.view_as = _BEAM_VIEW_AS[0]
    _INTROSPECTED.clear()

  with _while_open(_INTROSPECT_LOCK, _INTROSPECT_OPEN, install, restore):
    yield


# Values passed by reference between stages (by_reference): store id -> {value id: value}.
_IN_PROCESS_STORES: Dict[str, Dict[int, Any]] = {}
_IN_PROCESS_IDS = itertools.count(1)
# The store id of each pipeline that passes values by reference.
_PIPELINE_STORES: "weakref.WeakKeyDictionary[beam.Pipeline, str]" = weakref.WeakKeyDictionary()
_IN_PROCESS_LOCK = threading.Lock()


class _InProcessCoderImpl(coder_impl.StreamCoderImpl):
  """Encodes a value as the id under which it is held in this process's store; decoding
  takes it out of the store (`read_once`) or leaves it there (see by_reference)."""

  def __init__(self, store_id: str, read_once: bool):
    self._store_id = store_id
    self._read_once = read_once

  def encode_to_stream(self, value, stream, nested):
    value_id = next(_IN_PROCESS_IDS)
    _IN_PROCESS_STORES.setdefault(self._store_id, {})[value_id] = value
    stream.write_var_int64(value_id)

  def decode_from_stream(self, stream, nested):
    value_id = stream.read_var_int64()
    try:
      store = _IN_PROCESS_STORES[self._store_id]
      return store.pop(value_id) if self._read_once else store[value_id]
    except KeyError:
      raise RuntimeError(
          f"value {value_id} passed by reference (beam_io.by_reference, store "
          f"{self._store_id}) is not held in this process: it was read before (read_once), "
          "or its store was released, or the pipeline runs outside the process that built "
          "it") from None

  def estimate_size(self, value, nested=False):
    return 8  # an id; the value itself is never encoded

  def get_estimated_size_and_observables(self, value, nested=False):
    return self.estimate_size(value, nested), []


class InProcessCoder(coders.FastCoder):
  """A Beam coder that passes values by reference within one process (by_reference): an
  encoded value is an id in the store `store_id`; decoding it takes the value out
  (`read_once`) or leaves it for release_by_reference. The coder is its type hint's
  (InProcessValue): equal where they are."""

  def __init__(self, store_id: str, read_once: bool = True):
    self._hint = InProcessValue(store_id, read_once)

  def _create_impl(self):
    return _InProcessCoderImpl(self._hint.store_id, self._hint.read_once)

  def is_deterministic(self) -> bool:
    return False

  def to_type_hint(self):
    return self._hint

  @classmethod
  def from_type_hint(cls, typehint, unused_registry):
    return cls(typehint.store_id, typehint.read_once)

  def __eq__(self, other):
    return type(self) is type(other) and self._hint == other._hint

  def __hash__(self):
    return hash((type(self), self._hint))

  def __repr__(self):
    return f"InProcessCoder({self._hint.store_id!r}, read_once={self._hint.read_once})"


class InProcessValue(typehints.TypeConstraint):
  """The element type of a PCollection whose values are passed by reference (by_reference):
  any value, coded by InProcessCoder with the store `store_id`."""

  def __init__(self, store_id: str, read_once: bool = True):
    self.store_id = store_id
    self.read_once = read_once

  def __eq__(self, other):
    return (type(self) is type(other) and self.store_id == other.store_id
            and self.read_once == other.read_once)

  def __hash__(self):
    return hash((type(self), self.store_id, self.read_once))

  def __repr__(self):
    return f"InProcessValue({self.store_id!r}, read_once={self.read_once})"

  def _consistent_with_check_(self, sub):
    return True

  def type_check(self, instance):
    pass


beam.coders.registry.register_coder(InProcessValue, InProcessCoder)


def in_memory_one_worker(pipeline_options: PipelineOptions) -> bool:
  """True where the options ask Beam's local runner for its in-memory mode with one worker
  (--direct_running_mode=in_memory, --direct_num_workers=1): every stage in this process."""
  direct = pipeline_options.view_as(DirectOptions)
  return direct.direct_running_mode == "in_memory" and direct.direct_num_workers == 1


def passes_by_reference(pipeline: beam.Pipeline) -> bool:
  """True where by_reference passes values by reference: `pipeline` runs on Beam's Fn API
  runner (LOCAL_RUNNER) in memory with one worker, every stage in this process."""
  return (isinstance(pipeline.runner, fn_runner.FnApiRunner)
          and in_memory_one_worker(pipeline.options))


def spread(pcoll, label: str):
  """`pcoll` | beam.Reshuffle() (step `label`), so that the work of its elements (files to
  read) spreads over the workers; `pcoll` itself where the pipeline runs in this process with
  one worker (passes_by_reference), where a Reshuffle only adds a stage and 4 steps, each a
  fixed cost of Beam's local runner (issue 17)."""
  if passes_by_reference(pcoll.pipeline):
    return pcoll
  return pcoll | label >> beam.Reshuffle()


def _store_id(pipeline: beam.Pipeline) -> Optional[str]:
  """The id of `pipeline`'s by_reference store (made on first use), the same for the whole
  life of the pipeline object; None where it does not pass values by reference."""
  if not passes_by_reference(pipeline):
    return None
  with _IN_PROCESS_LOCK:
    store_id = _PIPELINE_STORES.get(pipeline)
    if store_id is None:
      store_id = _PIPELINE_STORES[pipeline] = f"{id(pipeline):x}-{next(_IN_PROCESS_IDS)}"
  return store_id


def by_reference(pcoll, keyed: bool = True, read_once: bool = True):
  """Has Beam pass the values of `pcoll` ((key, value) pairs with `keyed`, else whole
  elements) from the stage that writes them to the stage that reads them by reference, where
  the pipeline runs in this process (passes_by_reference); elsewhere `pcoll` is unchanged.

  Beam's local runner in memory encodes every element that crosses from one stage to the next
  (each shuffle, each materialized Flatten), copies the bytes through its data plane and
  decodes them: at ten times the benchmark's input (the 14 XML dumps, issue 17) its data
  plane moved 4.5 GB for 100 MB of XML, the mention payloads 8 times and the mention records
  4, about a fifth of the extraction's time, and the coded copies raised its peak memory.
  Passed by reference, a value is held in a store of this process under an id (InProcessCoder)
  and the id crosses instead; the reading stage takes the value back out. A key stays
  encoded as before (a shuffle groups by its bytes). So the reading step receives the object
  the writing step emitted, as two steps fused into one stage do; neither may change it.

  The coder also serves Beam's size sampling, which runs inside a stage too, between fused
  steps: for the first 10 elements of each step's output and about 10/n of them after, Beam
  measures the element with its coder's size estimate, which for the default coder walks a
  list value by value (and pickles what it does not know, such as an Entity). The pipelines
  send packs (lists of up to thousands of values) and gather whole outputs into one element,
  so nearly every pack was walked, some at every step they passed: 9% of the in-memory
  extraction's CPU in the process that runs its stages, the mention writer's gather 92 ms for
  its one element of 42k records (issue 17). By reference, a value's estimate is its id's 8
  bytes, so a PCollection of packs is marked even where its steps are fused.

  With `read_once`, the reading takes a value out of the store, so that it lives no longer
  than its coded bytes did: only for a PCollection that one stage reads once, a shuffle's
  input (every value is decoded once, by the stage that reads the groups) or a Flatten that
  one step reads; reading a value twice fails with a RuntimeError (never a wrong value).
  Without it, values stay in the store until the run ends: for a PCollection that several
  stages may read (one that a side input waits on, such as WriteShardedTFRecords' records).
  run_pipeline releases the store when the run ends (release_by_reference), also after a
  failure.

  Returns:
    `pcoll`, its element type set (InProcessValue) where values pass by reference.
  """
  store_id = _store_id(pcoll.pipeline)
  if store_id is None:
    return pcoll
  value = InProcessValue(store_id, read_once)
  pcoll.element_type = typehints.Tuple[typehints.Any, value] if keyed else value
  return pcoll


def flatten_by_reference(pcolls, label: str):
  """beam.Flatten (step `label`) of (key, value) PCollections that the Flatten alone reads,
  their values passed by reference (by_reference) into it and out of it: Beam's local runner
  in memory writes a Flatten of several stages' outputs to a buffer that its reading stage
  decodes, and each input is marked too, so that none is written with another coder first."""
  return by_reference([by_reference(p) for p in pcolls] | label >> beam.Flatten())


def release_by_reference(pipeline: beam.Pipeline) -> int:
  """Drops the values that `pipeline`'s run left in its by_reference store (a run that
  failed between a value's writing and its reading leaves some; a finished one none).

  Returns:
    The number of values dropped.
  """
  with _IN_PROCESS_LOCK:
    store_id = _PIPELINE_STORES.get(pipeline)
  if store_id is None:
    return 0
  return len(_IN_PROCESS_STORES.pop(store_id, {}))


def run_pipeline(pipeline: beam.Pipeline):
  """Runs `pipeline` to its end with brief_state_sampling, introspect_once and, where it passes
  values by reference, background_writes (every forked write finished, or failed, before it
  returns), and releases its by_reference store (release_by_reference), whether the run
  finishes or raises.

  Returns:
    (the PipelineResult, its final state).

  Raises:
    RuntimeError: a forked write failed (background_writes), besides what the run raises.
  """
  try:
    # ~40 bundle ends in memory without 200 ms waits; each DoFn inspected once; gathered
    # shard files written by forked processes while the run goes on.
    with brief_state_sampling(), introspect_once(), background_writes(_store_id(pipeline)):
      result = pipeline.run()
      state = result.wait_until_finish()
  finally:
    release_by_reference(pipeline)
  return result, state


# Shard files being written by forked processes (background_writes): run id -> the thread
# that opened the context and its [BackgroundWrite].
_BACKGROUND_WRITES: Dict[str, Tuple[int, List["BackgroundWrite"]]] = {}
_BACKGROUND_LOCK = threading.Lock()
# What a child sends on its pipe: this byte alone when its write succeeded, else its error
# message, at most _BACKGROUND_ERROR_BYTES (less than a pipe's buffer: the child never waits
# on its write).
_BACKGROUND_DONE = b"\0"
_BACKGROUND_ERROR_BYTES = 4000
# Signals that a terminal or a supervisor sends to stop a process: blocked around a fork (so
# that none reaches the child before it is set up), their default action in the child (it
# dies: it never runs the parent's code, such as a `finally` that removes a directory).
_STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})
# prctl(2): have the kernel send the child a signal when the thread that forked it ends.
_PR_SET_PDEATHSIG = 1


class BackgroundWrite(NamedTuple):
  """A forked process writing files: its pid, the read end of the pipe that carries its
  outcome (_BACKGROUND_DONE or an error message), and what it writes (for messages)."""
  pid: int
  outcome_fd: int
  what: str


@contextlib.contextmanager
def background_writes(run_id: Optional[str]) -> Iterator[None]:
  """While open, the gathered writers that allow it (WriteShardedTFRecords with gathered=True
  and background=True) of the run `run_id` (its by_reference store id; None: nothing changes),
  run in this thread, hand the sorting, TFRecord framing and writing of their local shard
  files to a forked copy of this process (fork_write) and go on: each counts its shards'
  records, emits its listing and leaves, so the next stages run on one core while the shards
  are written on another. Beam's in-memory runner runs every stage in one thread, and after
  the KB merge no step runs in a worker process: the 14 dumps' two TFRecord writers took 3.6
  of the 11 s that ran on one core (issue 17).

  On a normal exit, waits for every process forked in it and raises if one failed; on an
  exception (in the run or while waiting), kills them (SIGKILL) and reaps them, so that none
  writes into a directory that the caller is about to remove. A child also dies with the
  thread that forked it (PR_SET_PDEATHSIG), so a killed extraction leaves none writing.

  Raises:
    RuntimeError: naming the files of each write that failed and the child's error (or exit
      status).
  """
  if run_id is None:
    yield
    return
  with _BACKGROUND_LOCK:
    if run_id in _BACKGROUND_WRITES:
      raise RuntimeError(f"background_writes of run {run_id} opened twice")
    _BACKGROUND_WRITES[run_id] = (threading.get_ident(), [])
  try:
    yield
  except BaseException:
    _end_background_writes(run_id, kill=True)
    raise
  _end_background_writes(run_id, kill=False)


def _end_background_writes(run_id: str, kill: bool) -> None:
  """Waits for (with `kill`, first kills) the writes forked for `run_id`; raises
  RuntimeError for those that failed, unless `kill`. An exception while it waits (an
  interrupt) kills and reaps the writes not yet reaped, then goes on."""
  with _BACKGROUND_LOCK:
    _, writes = _BACKGROUND_WRITES.pop(run_id, (None, []))
  failed = []
  pending = list(writes)
  while pending:
    write = pending.pop(0)  # _outcome reaps it and closes its pipe, whatever happens
    try:
      error = _outcome(write, kill)
    except BaseException:
      for rest in pending:
        try:
          _outcome(rest, kill=True)
        except BaseException:  # pylint: disable=broad-except
          pass
      raise
    if error is not None and not kill:
      failed.append(f"{write.what}: {error}")
  if failed:
    raise RuntimeError("writing in a forked process failed: " + "; ".join(failed))


def _kill(pid: int) -> None:
  try:
    os.kill(pid, signal.SIGKILL)
  except ProcessLookupError:
    pass


def _reap(pid: int) -> Optional[int]:
  """Waits for the child `pid` to end; its exit code (negative: the signal that ended it), or
  None where it was reaped already (SIGCHLD ignored)."""
  try:
    _, status = os.waitpid(pid, 0)
  except ChildProcessError:
    return None
  return os.waitstatus_to_exitcode(status)


def _outcome(write: BackgroundWrite, kill: bool = False) -> Optional[str]:
  """Waits for the child of `write` to end (with `kill`, kills it first) and reaps it; None
  where it wrote everything, else its error. Interrupted while it waits, kills and reaps the
  child before it raises (never a pid left to be killed again once reused). Closes the pipe
  either way."""
  try:
    if kill:
      _kill(write.pid)
    try:
      code = _reap(write.pid)
    except BaseException:
      _kill(write.pid)
      _reap(write.pid)
      raise
    # Read once the child is gone, without waiting for the pipe's end: a process forked
    # meanwhile by someone else (a multiprocessing pool) may hold a copy of its write end.
    os.set_blocking(write.outcome_fd, False)
    said = b""
    try:
      while len(said) <= _BACKGROUND_ERROR_BYTES:
        part = os.read(write.outcome_fd, _BACKGROUND_ERROR_BYTES + 1)
        if not part:
          break
        said += part
    except BlockingIOError:
      pass
  finally:
    os.close(write.outcome_fd)
  if said == _BACKGROUND_DONE and code in (0, None):
    return None
  if said and said != _BACKGROUND_DONE:
    return said.decode("utf-8", "replace")
  return ("the writing process exited with status " + str(code) if code is not None
          else "the writing process ended without saying it finished")


@functools.lru_cache(maxsize=1)
def _prctl():
  """libc's prctl, looked up in the parent: a child forked while another thread held the
  dynamic loader's lock would wait forever on it."""
  return ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent(prctl, parent: int) -> None:
  """In a forked child: SIGKILL when the thread that forked it ends (`prctl`: _prctl()), and
  exit now if the parent `parent` is gone already."""
  if prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
    raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
  if os.getppid() != parent:
    os._exit(1)  # pylint: disable=protected-access


def fork_write(run_id: Optional[str], paths: Sequence[str], write: Callable[[], None]) -> bool:
  """Runs write() (which writes the files `paths`) in a forked copy of this process, within
  background_writes(run_id) and in the thread that opened it; returns False, having done
  nothing, where it cannot: no such context is open here, a path is not local, not Linux,
  SIGCHLD is ignored, or the OS cannot fork.

  The child sees this process's memory as it is (copy on write: nothing is sent), runs
  without the cyclic garbage collector (a collection would touch, and so copy, every object
  of the parent), dies by the default action of a stop signal (SIGINT, SIGTERM, ...) and when
  the forking thread ends, and leaves by os._exit (no atexit handlers, no flush of inherited
  buffers), its outcome on a pipe. Beam's in-memory runner's other threads (its data
  plane's flusher, idle read and parse pools) hold no lock that write() takes: it sorts,
  frames and writes bytes.
  """
  if run_id is None or not sys.platform.startswith("linux") or not paths:
    return False
  if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:
    # Children are then reaped by the kernel, and waitpid waits for all of them (the parse
    # pool's too): no outcome to wait for.
    return False
  try:
    if not all(isinstance(FileSystems.get_filesystem(path), LocalFileSystem) for path in paths):
      return False
  except ValueError:  # a scheme that no file system of this process handles
    return False
  with _BACKGROUND_LOCK:
    thread, writes = _BACKGROUND_WRITES.get(run_id, (None, None))
    if writes is None or thread != threading.get_ident():
      return False
    prctl = _prctl()
    outcome_fd, child_fd = os.pipe()
    parent = os.getpid()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
      pid = os.fork()
    except OSError:
      signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
      os.close(outcome_fd)
      os.close(child_fd)
      return False
    if pid == 0:  # the child
      said = _BACKGROUND_DONE
      try:
        for signum in _STOP_SIGNALS:
          signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        os.close(outcome_fd)
        _die_with_parent(prctl, parent)
        gc.disable()
        write()
      except BaseException as e:  # pylint: disable=broad-except
        said = f"{type(e).__name__}: {e}".encode("utf-8", "replace")[:_BACKGROUND_ERROR_BYTES]
      finally:
        try:
          os.write(child_fd, said)
        finally:
          os._exit(0 if said == _BACKGROUND_DONE else 1)  # pylint: disable=protected-access
    os.close(child_fd)
    what = paths[0] if len(paths) == 1 else f"{paths[0]} and {len(paths) - 1} more"
    writes.append(BackgroundWrite(pid, outcome_fd, what))  # before a stop signal can arrive
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
  return True


# Values into and out of the pipelines' own shuffles (CountedGroupByKey) and records written
# (WriteShardedTFRecords), counted in a namespace of their own: never in stats.json, only
# compared by a finished run (flow_losses) before it publishes anything.
FLOW_NAMESPACE = "beam_pipelines_flow"


def _pack_size(pack) -> int:
  return 0 if pack is None else len(pack)


class CountedGroupByKey(beam.PTransform):
  """beam.GroupByKey of (key, pack) elements (a pack: a list of values; None: a marker that
  holds none), counting the values that go in ('LABEL/in') and those in the groups that come
  out ('LABEL/out', FLOW_NAMESPACE counters), so that a finished run can check that the
  shuffle lost and duplicated nothing (flow_losses). Groups come out as (key, [pack, ...]).
  With packed=False the elements are plain (key, value) pairs, each value counting one.

  Why: with --direct_running_mode=multi_processing and 2 workers, Beam's local runner
  (FnApiRunner, Beam 2.x) finished 6 of 7 extractions of the full title and redirect lists
  with values lost and no error: 4-9% of the entity records on their way to the shard writer
  each time, and in three runs also values in the KB merge (the redirect edges of 144k and
  147k listed titles, which became entities instead of aliases) (issue 17). Every shuffle
  counted handed on what went in: the entity records went missing between the step that
  made them, which two stages read, and the shard writer's shuffle. These counts, with what
  each reader of a shared input read (read_counter) and the records written
  (WriteShardedTFRecords), let a run refuse to publish what does not add up
  (extraction.check_flow).
  """

  def __init__(self, label: str, packed: bool = True):
    super().__init__()
    self._label = label
    self._packed = packed  # False: each value counts one (plain (key, value) elements)

  def expand(self, pcoll):
    sent = beam.metrics.Metrics.counter(FLOW_NAMESPACE, f"{self._label}/in")
    grouped = beam.metrics.Metrics.counter(FLOW_NAMESPACE, f"{self._label}/out")
    size = _pack_size if self._packed else (lambda value: 1)

    def count_in(element):
      sent.inc(size(element[1]))
      return element

    def count_out(element):
      values = list(element[1])
      grouped.inc(sum(size(value) for value in values))
      return element[0], values

    # The shuffle's values pass by reference on the local runner in memory (by_reference).
    counted = by_reference(pcoll | "CountIn" >> beam.Map(count_in))
    # The groups, too: a group is a list of every value of its key (by_reference on size
    # sampling).
    return by_reference(counted
                        | "Group" >> beam.GroupByKey()
                        | "CountOut" >> beam.Map(count_out))


def read_counter(reads: str):
  """The FLOW_NAMESPACE counter of the items that step STEP read of INPUT (`reads`:
  'INPUT@STEP'): every step that reads one PCollection must read all of it (flow_losses)."""
  return beam.metrics.Metrics.counter(FLOW_NAMESPACE, f"{reads}/read")


def flow_losses(flow: Dict[str, int],
                expected_written: Optional[Dict[str, int]] = None,
                expected_reads: Optional[Dict[str, int]] = None) -> List[str]:
  """What a finished run's FLOW_NAMESPACE counters say went missing: one line per shuffle
  whose values out differ from its values in, per PCollection whose reading steps
  (read_counter) read different numbers of items or, where `expected_reads` gives what its
  producer counted ({INPUT: items}; 0: none expected), other than that number, and per
  output whose records written differ from `expected_written` ({output prefix: records the
  pipeline counted}). Empty: nothing was lost."""
  problems = []
  expected_reads = expected_reads or {}
  reads = {}
  for name, n in flow.items():
    if name.endswith("/read") and "@" in name:
      source, step = name[:-len("/read")].split("@", 1)
      reads.setdefault(source, {})[step] = n

  def readers(source):
    return ", ".join(f"{step}: {n}" for step, n in sorted(reads.get(source, {}).items()))

  for source, expected in sorted(expected_reads.items()):
    if expected and set(reads.get(source, {}).values()) != {expected}:
      problems.append(f"{source}: {expected} made, read by {readers(source) or 'no step'}")
  for source, by_step in sorted(reads.items()):
    if source not in expected_reads and len(set(by_step.values())) > 1:
      problems.append(f"{source} read by {readers(source)}")
  labels = sorted({name.rsplit("/", 1)[0] for name in flow
                   if name.endswith("/in") or name.endswith("/out")})
  for label in labels:
    sent, got = flow.get(f"{label}/in", 0), flow.get(f"{label}/out", 0)
    if sent != got:
      problems.append(f"shuffle {label}: {sent} values in, {got} out")
  for prefix, expected in sorted((expected_written or {}).items()):
    written = flow.get(f"{prefix}/written", 0)
    if written != expected:
      problems.append(f"{prefix} files: {written} records written, {expected} counted")
  return problems


def counters(result, namespace: str) -> Dict[str, int]:
  """The counters of `namespace` in a finished pipeline's result: {name: value}, by name.

  Committed values where the runner has them, else attempted; a name counted in several steps
  gets their sum.
  """
  totals = {}
  query = result.metrics().query(MetricsFilter().with_namespace(namespace))
  for counter in query["counters"]:
    value = counter.committed if counter.committed is not None else counter.attempted
    totals[counter.key.metric.name] = totals.get(counter.key.metric.name, 0) + int(value)
  return dict(sorted(totals.items()))


def format_tsv(rows: List[Tuple[Any, ...]]) -> str:
  return "".join("\t".join(str(v) for v in row) + "\n" for row in sorted(rows))


class WriteTextFile(beam.PTransform):
  """Writes all rows of a PCollection as one sorted TSV file (rows of str/int); with
  `packed=True` the elements are lists of rows (the same file); with `lines`, a function of
  the list of all elements that returns the file's lines in order (each ending in a newline),
  the elements are whatever it takes. An empty input writes an empty file (`lines` is given
  an empty list).

  The rows are collected under one key with a marker element (so that the key exists when
  the input is empty), not by beam.combiners.ToList: a global combine hands its result to
  its default-injecting step as a side input, whose cache measures the whole list object by
  object (objsize; a fifth of a second per 30,000 rows here, issue 17).
  """

  def __init__(self, path: str, packed: bool = False,
               lines: Optional[Callable[[List[Any]], List[str]]] = None):
    super().__init__()
    self._path = path
    self._packed = packed
    self._lines = lines

  def expand(self, rows):
    path, packed, lines = self._path, self._packed, self._lines

    def write(keyed):
      collected = [r for r in keyed[1] if r is not None]  # None: the marker
      if lines is not None:
        text = "".join(lines(collected))
      else:
        text = format_tsv([row for pack in collected for row in pack] if packed else collected)
      with FileSystems.create(path) as f:
        f.write(text.encode("utf-8"))
      return path

    # The rows (or packs) pass by reference on the local runner in memory: Beam's combine
    # encoded and decoded the alias table twice on its way here, 2 s of the 14 dumps'
    # extraction.
    keyed = rows | "KeyRows" >> beam.Map(lambda row: (0, row))
    marker = rows.pipeline | "Marker" >> beam.Create([(0, None)])
    return (flatten_by_reference((keyed, marker), "RowsAndMarker")
            | "Collect" >> beam.GroupByKey()
            | "Write" >> beam.Map(write))


def _masked_crc32c(data: bytes, _value=google_crc32c.value,
                   _pack=struct.Struct("<I").pack) -> bytes:
  crc = _value(data)
  return _pack((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


@functools.lru_cache(maxsize=1 << 16)
def _tfrecord_header(size: int) -> bytes:
  """A record's length (uint64, little-endian) and its masked CRC-32C (kept per length: the
  records of a file have few distinct lengths)."""
  length = struct.pack("<Q", size)
  return length + _masked_crc32c(length)


def tfrecord_frame(record: bytes) -> bytes:
  """One record as TFRecord framing writes it: its length (uint64, little-endian), the masked
  CRC-32C of those 8 bytes, the record, the masked CRC-32C of the record (the format of
  tf.io.TFRecordWriter without compression: tensorflow/core/lib/io/record_writer.cc)."""
  return _tfrecord_header(len(record)) + record + _masked_crc32c(record)


def tfrecord_chunks(records: Iterable[bytes], chunk_bytes: int = 1 << 22) -> Iterator[bytes]:
  """The TFRecord framing of `records` (tfrecord_frame of each, in order) joined into chunks of
  about `chunk_bytes`: a file's writes, one call per chunk instead of per record."""
  parts, size = [], 0
  header, crc = _tfrecord_header, _masked_crc32c
  for record in records:
    parts += (header(len(record)), record, crc(record))
    size += len(record)
    if size >= chunk_bytes:
      yield b"".join(parts)
      parts, size = [], 0
  if parts:
    yield b"".join(parts)


_SORT_KEY = operator.itemgetter(0)


def sorted_records(packs) -> List[Tuple[Any, bytes]]:
  """Packs of (sort key, record) -> all pairs in the order of sorted() on the pairs: by key,
  then, for equal keys, by record. Sorted by key alone, one comparison of keys a step (the
  pairs' sort compares their keys twice: for equality, then for order; 9.4 -> 5.0 s on 4.5M
  entity records of listed titles in 23 shards, issue 17), then by the pairs only where a key
  repeats."""
  rows = [row for pack in packs for row in pack]
  rows.sort(key=_SORT_KEY)
  if any(map(operator.eq, map(_SORT_KEY, rows), map(_SORT_KEY, itertools.islice(rows, 1, None)))):
    rows.sort()
  return rows


def write_shard_file(path: str, packs) -> int:
  """Writes the records of `packs` (lists of (sort key, serialized record)) to the TFRecord
  file `path`, in sorted_records' order; returns their number. The TFRecord framing is
  written here (no TensorFlow in the extraction's workers), through Beam's file systems
  (local, gs://, ...): the bytes of tf.io.TFRecordWriter's."""
  rows = sorted_records(packs)
  with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
    for chunk in tfrecord_chunks(value for _, value in rows):
      f.write(chunk)
  return len(rows)


def shard_of(key: str, num_shards: int) -> int:
  """The shard of a record's key: a fingerprint (sha256), the same in every process."""
  return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % num_shards


# Bounds of a pack of values sent as one Beam element (Packs, kb_merge.build_entity).
PACK_MAX_VALUES = 1024
PACK_MAX_BYTES = 32 << 20


def chunks(values: list, size: int = PACK_MAX_VALUES) -> Iterator[list]:
  """values in consecutive lists of `size` values (the last one shorter), for sending a list
  of outputs as packs."""
  for i in range(0, len(values), size):
    yield values[i:i + size]


class Packs:
  """Values gathered into packs (lists) by key, bounded, for DoFns that send packs instead of
  values (each Beam element costs an encode, a decode and a call at every step; issue 17).

  A pack is complete when it holds `max_values` values; when the packs held hold `max_bytes`
  (by `size_of(value)`) all of them are; `take()` hands over the rest (at the end of a
  bundle). So no pack grows with the data: a key with a million values is a thousand packs.

  Args:
    max_values: values per pack at most.
    max_bytes: bytes held in all packs at most (0: no limit), by `size_of`.
    size_of: value -> its size in bytes; None: only `max_values` bounds the packs.
    freeze_full: when add() completes packs, move every object alive out of the cyclic
      garbage collector's reach first (gc.freeze, as relax_garbage_collection does at a step's
      setup), for the steps of the pipelines: the values of a complete pack live on (through
      the shuffle to the next step) and hold no reference cycles, so reference counting frees
      them, but each young collection traversed every one of them once (they outlive it):
      484 young collections of 27 ms, 13.2 s of a 267 s full-KB extraction, 1.1-1.4 s with
      this (issue 17). A reference cycle that is garbage when a pack completes is then never
      collected (the full KB's collections found 4,200-5,900 objects in all with it, 5,600
      without; its peak RSS was 4.1 GB in two runs and 4.4 GB in one with it, 4.1 GB in
      three without).
  """

  def __init__(self, max_values: int = PACK_MAX_VALUES, max_bytes: int = PACK_MAX_BYTES,
               size_of=None, freeze_full: bool = False):
    self._max_values = max_values
    self._max_bytes = max_bytes
    self._size_of = size_of
    self._freeze_full = freeze_full
    # The packs held, the bytes they hold, and each one's bytes (so that a completed pack's
    # bytes are not summed again: issue 17, 3 s of the full-KB extraction).
    self._packs, self._bytes, self._pack_bytes = {}, 0, {}

  def add(self, key, value) -> List[Tuple[Any, list]]:
    """Adds one value; returns the (key, pack)s it completes (mostly none)."""
    pack = self._packs.get(key)
    if pack is None:
      pack = self._packs[key] = []
    pack.append(value)
    size_of = self._size_of
    if size_of is not None:
      size = size_of(value)
      self._bytes += size
      self._pack_bytes[key] = self._pack_bytes.get(key, 0) + size
    if len(pack) >= self._max_values:
      del self._packs[key]
      if size_of is not None:
        self._bytes -= self._pack_bytes.pop(key)
      done = [(key, pack)]
    elif self._max_bytes and self._bytes >= self._max_bytes:
      done = self.take()
    else:
      return []
    if self._freeze_full:
      gc.freeze()
    return done

  def add_all(self, key, values: Sequence[Any]) -> List[Tuple[Any, list]]:
    """Adds `values` in order; returns the (key, pack)s they complete: what add() of each
    returns, together, in one call and a slice per pack instead of a call per value."""
    done = []
    size_of, max_values, max_bytes = self._size_of, self._max_values, self._max_bytes
    i, n = 0, len(values)
    while i < n:
      pack = self._packs.get(key)
      if pack is None:
        pack = self._packs[key] = []
      j = min(n, i + max_values - len(pack))  # the values that fill this pack
      if size_of is not None:
        held, added = self._bytes, 0
        for k in range(i, j):
          added += size_of(values[k])
          if max_bytes and held + added >= max_bytes:
            j = k + 1  # the value that reaches max_bytes completes every pack held
            break
        self._bytes = held + added
        self._pack_bytes[key] = self._pack_bytes.get(key, 0) + added
      pack.extend(values[i:j])
      i = j
      if len(pack) >= max_values:
        del self._packs[key]
        if size_of is not None:
          self._bytes -= self._pack_bytes.pop(key)
        done.append((key, pack))
      elif max_bytes and self._bytes >= max_bytes:
        done.extend(self.take())
    if done and self._freeze_full:
      gc.freeze()
    return done

  def take(self) -> List[Tuple[Any, list]]:
    """The (key, pack)s held, which are no longer held."""
    packs, self._packs, self._bytes, self._pack_bytes = self._packs, {}, 0, {}
    return list(packs.items())


# Thresholds of Python's cyclic garbage collector in a process that runs the extraction's
# steps (relax_garbage_collection): a young collection every 100,000 allocations of container
# objects, not 700, and older ones rarely.
GC_THRESHOLDS = (100_000, 50, 1000)


def relax_garbage_collection() -> None:
  """Moves the objects alive now out of the cyclic garbage collector's reach (gc.freeze) and
  sets its thresholds to GC_THRESHOLDS, for the whole process (DoFn.setup calls it: a worker
  process, or the caller's for the in-memory runner; the thresholds stay set after).

  Beam decodes every element into new objects (packs of tuples of strings) that live a little
  while and have no reference cycles, so reference counting frees them; with the default
  thresholds the collector promoted them and traversed the heap again and again: 54 s of a
  425 s full-KB extraction, 19.5 s with these thresholds (issue 17). A page's parse likewise
  makes and drops tens of thousands of small objects, and full collections traversed every
  object of the modules loaded: a quarter of the parse time before gc.freeze."""
  gc.freeze()
  gc.set_threshold(*GC_THRESHOLDS)


def init_pool_worker(gc_thresholds: Optional[Tuple[int, int, int]] = GC_THRESHOLDS,
                     initializer: Optional[Callable[..., None]] = None,
                     initargs: tuple = (), parent: Optional[int] = None) -> None:
  """Initializer of an OrderedPool's worker process: on Linux, with the pid of the process
  that made the pool (`parent`), SIGKILL when the thread that started it ends (a worker of a
  killed run waited forever on the pool's queue, whose other end its sibling holds); the
  cyclic garbage collector set as in the step's own process (gc.freeze: in a forked worker,
  the objects it inherits, which a collection would otherwise touch and so copy, stay out of
  reach; then `gc_thresholds`); SIGINT and SIGTERM back to Python's defaults (a forked
  worker inherits the handlers of its maker, such as an entry point's, which reports the
  interrupt of the whole run: dense_entity.common.errors.interrupts_raise); then
  initializer(*initargs), the step's own."""
  if parent is not None and sys.platform.startswith("linux"):
    _die_with_parent(_prctl(), parent)
  signal.signal(signal.SIGINT, signal.default_int_handler)
  signal.signal(signal.SIGTERM, signal.SIG_DFL)
  gc.freeze()
  if gc_thresholds:
    gc.set_threshold(*gc_thresholds)
  if initializer is not None:
    initializer(*initargs)


def check_processes(processes: int) -> None:
  """Refuses a number of worker processes below 1 (a DoFn's `processes`, at construction).

  Raises:
    ValueError: `processes` is below 1.
  """
  if processes < 1:
    raise ValueError(f"processes must be at least 1, got {processes}")


class OrderedPool:
  """Calls in worker processes (a concurrent.futures pool), their results in the order they
  were submitted, at most 2 calls per process in flight: how one in-memory run's step uses
  several cores (issue 17) with the outputs of an inline run, byte for byte. A worker process
  that dies fails the step (BrokenProcessPool); none is lost silently.

  Args:
    processes: worker processes (at least 2: with 1, a step runs its work inline).
    start_method: 'fork' or 'spawn' (multiprocessing; see extraction.ParsePageFn).
    initializer, initargs: run in each worker process when it starts, after init_pool_worker
      has set its garbage collector (picklable: a module-level function).
  """

  def __init__(self, processes: int, start_method: str,
               initializer: Optional[Callable[..., None]] = None, initargs: tuple = ()):
    self._processes = processes
    if sys.platform.startswith("linux"):
      _prctl()  # looked up here: a forked worker then finds it without the dynamic loader
    self._executor = concurrent.futures.ProcessPoolExecutor(
        processes, mp_context=multiprocessing.get_context(start_method),
        initializer=init_pool_worker,
        initargs=(GC_THRESHOLDS, initializer, initargs, os.getpid()))
    self._in_flight = collections.deque()

  def submit(self, fn: Callable[..., Any], *args) -> None:
    """Submits fn(*args) (fn and args picklable: a module-level function)."""
    self._in_flight.append(self._executor.submit(fn, *args))

  def results(self, wait_all: bool = False) -> Iterator[Any]:
    """Results of the calls in flight, in submission order: every one with `wait_all`, else
    the oldest ones that are done, and enough to leave at most 2 per process in flight."""
    while self._in_flight and (wait_all or len(self._in_flight) > 2 * self._processes
                               or self._in_flight[0].done()):
      yield self._in_flight.popleft().result()

  def shutdown(self) -> None:
    self._executor.shutdown(wait=True, cancel_futures=True)


def record_size(record: Tuple[Any, bytes]) -> int:
  """Bytes of a (sort key, serialized record) pair's record: the size that bounds its packs."""
  return len(record[1])


# The windows of a value in the global window, made once: GlobalWindows.windowed_value makes a
# GlobalWindow for each value, which reads its end from a proto each time (1.8 us a value,
# 0.3 us with these; ~30,000 packs at the end of the 7 dumps' parse bundle, issue 17).
_GLOBAL_WINDOWS = (beam.transforms.window.GlobalWindow(),)


def in_global_window(element):
  """`element` as a DoFn's finish_bundle outputs it: a WindowedValue in the global window
  (GlobalWindows.windowed_value's: minimum timestamp, unknown pane)."""
  return windowed_value.WindowedValue(element, timestamp.MIN_TIMESTAMP, _GLOBAL_WINDOWS)


def output_in_global_window(output):
  """A process() output (a value or a TaggedOutput) as finish_bundle outputs it: the value,
  or the tagged output's value, in_global_window."""
  if isinstance(output, beam.pvalue.TaggedOutput):
    return beam.pvalue.TaggedOutput(output.tag, in_global_window(output.value))
  return in_global_window(output)


class PackingDoFn(beam.DoFn):
  """Base of the DoFns that send packs instead of values (each Beam element costs an encode,
  a decode and a call at every step; issue 17): `self._packs` (Packs, with the bounds given
  and freeze_full) is made for each bundle; what it still holds at the bundle's end goes out
  as (key, pack) elements, or as the packs alone with `keyed=False`. setup() relaxes the
  cyclic garbage collector (relax_garbage_collection): these steps make and drop many
  objects."""

  def __init__(self, size_of=None, keyed: bool = True, max_values: int = PACK_MAX_VALUES,
               max_bytes: int = PACK_MAX_BYTES):
    super().__init__()
    self._size_of = size_of
    self._keyed = keyed
    self._max_values = max_values
    self._max_bytes = max_bytes

  def setup(self):
    relax_garbage_collection()

  def start_bundle(self):
    self._packs = Packs(self._max_values, self._max_bytes, self._size_of, freeze_full=True)

  def finish_bundle(self):
    for key, pack in self._packs.take():
      yield in_global_window((key, pack) if self._keyed else pack)


class PackByKey(PackingDoFn):
  """(key, value) -> (key, [value, ...]): the values of a bundle packed by key (Packs, with
  its bounds; the last packs at the end of the bundle), so that a shuffle moves one element
  per pack, not per value.

  Args:
    max_values, max_bytes, size_of: as Packs.
  """

  def __init__(self, max_values: int = PACK_MAX_VALUES, max_bytes: int = PACK_MAX_BYTES,
               size_of=None):
    super().__init__(size_of=size_of, max_values=max_values, max_bytes=max_bytes)

  def process(self, element):
    key, value = element
    return self._packs.add(key, value)


class PackByShard(PackByKey):
  """[(sort key, record), ...] with the number of shards n (a side input) -> (shard, [(sort
  key, record), ...]): the records of a bundle's input packs repacked by their shard
  (shard_of(sort key, n)), with PackByKey's bounds, in one step per input pack. With one
  shard each input pack goes on as shard 0's, as it is (its records need no fingerprint; the
  packs that come here are bounded as PackByKey's: beam_io.Packs, kb_merge's chunks), and
  the shard file is the same: its writer sorts the records of all its packs."""

  def process(self, records, n):  # pylint: disable=arguments-differ
    if n == 1:
      yield 0, records
      return
    add = self._packs.add
    for record in records:
      yield from add(shard_of(record[0], n), record)


class WriteShardedTFRecords(beam.PTransform):
  """(sort key, serialized record) -> PREFIX-SSSSS-of-NNNNN.tfrecord files, deterministically.

  A record's shard is a fingerprint of its key; records are sorted by key within a shard; every
  shard file is written, even an empty one. The same input gives byte-identical files whatever
  the runner or bundling (Beam's own sharded writes assign shards at random). With
  `packed=True` the input elements are lists of (sort key, serialized record) (the same files:
  packing saves Beam's per-element cost at every step); on Beam's local runner in memory
  those lists then pass to the packing step by reference and stay in the process until
  release_by_reference: run such a pipeline with run_pipeline, which releases them.

  With `gathered=True` (for Beam's local runner in memory with one worker, where every record
  is in the one process anyway) all records go under one key through one shuffle and a
  single step writes every shard, the same files: one stage instead of five (the count, the
  shard assignment, the shuffle by shard, the empty shards, their listing), each a fixed
  cost of that runner (about 10 ms a stage, issue 17). Elsewhere it would put every record
  on one worker: leave it False there.

  With `background=True` as well, in a run of run_pipeline, that step counts and lists the
  shards and hands their sorting, framing and writing to a forked process (background_writes,
  fork_write; local files only), which run_pipeline waits for before it returns: the same
  files, but complete only then, not when their listing comes out. So only for a pipeline
  that reads none of them (nor waits on their listing to read them).
  """

  def __init__(self, path_prefix: str, num_shards: Optional[int] = None,
               records_per_shard: int = RECORDS_PER_SHARD, packed: bool = False,
               gathered: bool = False, background: bool = False):
    super().__init__()
    self._path_prefix = path_prefix
    self._num_shards = num_shards
    self._records_per_shard = records_per_shard
    self._packed = packed
    self._gathered = gathered
    self._background = background

  def expand(self, records):
    path_prefix = self._path_prefix
    per_shard = self._records_per_shard

    def shards_for(n):
      return max(1, -(-n // per_shard))

    # Records in the files ('PREFIX/written', PREFIX the file name prefix: 'entities'),
    # checked against what the pipeline counted (flow_losses).
    name = path_prefix.rsplit("/", 1)[-1]
    written = beam.metrics.Metrics.counter(FLOW_NAMESPACE, f"{name}/written")

    def shard_path(shard, n):
      return f"{path_prefix}-{shard:05d}-of-{n:05d}.tfrecord"

    def write(element, n):
      shard, packs = element
      path = shard_path(shard, n)
      count = write_shard_file(path, packs)
      written.inc(count)
      return path, count

    if self._gathered:
      fixed = self._num_shards
      run_id = _store_id(records.pipeline) if self._background else None

      def write_all(element, packed):
        packs = list(element[1]) if packed else [list(element[1])]
        n = fixed or shards_for(sum(map(len, packs)))
        if n == 1:
          by_shard = [packs]
        else:
          by_shard = [[[]] for _ in range(n)]  # each shard's records in one pack
          for pack in packs:
            for record in pack:
              by_shard[shard_of(record[0], n)][0].append(record)
        paths = [shard_path(shard, n) for shard in range(n)]

        def write_shards():
          for path, shard_packs in zip(paths, by_shard):
            write_shard_file(path, shard_packs)

        if fork_write(run_id, paths, write_shards):
          for path, shard_packs in zip(paths, by_shard):
            count = sum(map(len, shard_packs))
            written.inc(count)
            yield path, count
          return
        for shard, shard_packs in enumerate(by_shard):
          yield write((shard, shard_packs), n)

      def listing(_, listed):
        if listed:
          return listed
        # No record (no group to write): the one shard, or every shard asked for, empty.
        return [write((shard, []), fixed or 1) for shard in range(fixed or 1)]

      listed = (by_reference(records | "KeyAll" >> beam.Map(lambda element: (None, element)))
                | "Gather" >> CountedGroupByKey(f"{name}/shards", packed=self._packed)
                | "WriteShards" >> beam.FlatMap(write_all, self._packed))
      return (records.pipeline | "Once" >> beam.Impulse()
              | "AllShards" >> beam.FlatMap(listing, beam.pvalue.AsList(listed)))
    if self._packed:
      # Read by the count and, once it is known (a side input), by PackByShard: Beam's local
      # runner in memory writes the packs to a buffer in between, by reference here.
      records = by_reference(records, keyed=False, read_once=False)
    if self._num_shards:
      num_shards = (records.pipeline | "NumShards" >> beam.Create([self._num_shards]))
    else:
      if self._packed:
        # One size per pack, summed under one key: not CombineGlobally, whose expansion is 9
        # steps, each a fixed cost on the local runner (about 6 ms a step, issue 17).
        num_shards = (records | "PackSizes" >> beam.Map(lambda pack: (None, len(pack)))
                      | "SumSizes" >> beam.GroupByKey()
                      | "NumShards" >> beam.Map(lambda sizes: shards_for(sum(sizes[1]))))
      else:
        num_shards = (records | "Count" >> beam.combiners.Count.Globally()
                      | "NumShards" >> beam.Map(shards_for))
    # An empty input has no size: one shard (written empty).
    num_shards_side = beam.pvalue.AsSingleton(num_shards, default_value=1)

    def write_empty(_, n, nonempty):
      # The shards no record went to, written empty so that every shard file exists.
      done = {path for path, _ in nonempty}
      for shard in range(n):
        path = shard_path(shard, n)
        if path not in done:
          with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED):
            pass
          yield path, 0

    if self._packed:
      keyed = records | "PackByShard" >> beam.ParDo(PackByShard(size_of=record_size),
                                                     num_shards_side)
    else:
      keyed = (records
               | "AssignShard" >> beam.Map(lambda kv, n: (shard_of(kv[0], n), kv),
                                           num_shards_side)
               | "PackByShard" >> beam.ParDo(PackByKey(size_of=record_size)))
    # The packs go straight into the shuffle, fused with the step that made them; a Flatten
    # with one marker per shard (what wrote the empty shards before) made Beam's in-memory
    # runner copy every record into a buffer of its own and out again (issue 17).
    nonempty = (keyed
                | "GroupByShard" >> CountedGroupByKey(f"{name}/shards")
                | "WriteShard" >> beam.Map(write, num_shards_side))
    empty = (records.pipeline | "Once" >> beam.Impulse()
             | "WriteEmptyShards" >> beam.FlatMap(write_empty, num_shards_side,
                                                  beam.pvalue.AsList(nonempty)))
    return (nonempty, empty) | "AllShards" >> beam.Flatten()

