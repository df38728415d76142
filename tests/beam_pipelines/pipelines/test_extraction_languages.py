"""The extraction on a Ukrainian dump read as a multistream dump, beside an English one.

The <siteinfo> header is in the first bz2 stream only; the pipeline reads it once up front and
each page is parsed with its own wiki's namespaces, redirect words and link trail.
"""

import bz2
import glob
import os

import pytest
import tensorflow as tf

from beam_pipelines.pipelines import extraction as extract
from dense_entity.kb import schema
from tests.beam_pipelines.dumps import multistream_testutil

# The header of ukwiki-truncated-100k.xml.bz2 (shared/data/otherwiki), shortened.
UK_HEADER = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="uk">
  <siteinfo>
    <sitename>Вікіпедія</sitename>
    <dbname>ukwiki</dbname>
    <case>first-letter</case>
    <namespaces>
      <namespace key="-2" case="first-letter">Медіа</namespace>
      <namespace key="0" case="first-letter" />
      <namespace key="4" case="first-letter">Вікіпедія</namespace>
      <namespace key="6" case="first-letter">Файл</namespace>
      <namespace key="10" case="first-letter">Шаблон</namespace>
      <namespace key="14" case="first-letter">Категорія</namespace>
    </namespaces>
  </siteinfo>
"""


def _page(page_id, title, text, ns=0, redirect=None):
  redirect_xml = f'<redirect title="{redirect}" />' if redirect else ""
  text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
  return (f"  <page>\n    <title>{title}</title>\n    <ns>{ns}</ns>\n    <id>{page_id}</id>\n"
          f"    {redirect_xml}<revision><id>{page_id + 500}</id>"
          f'<text xml:space="preserve">{text}</text></revision>\n  </page>\n')


ESPERANTO = ("'''Есперанто''' — мова, яку створив [[Людвік Заменгоф|Заменгоф]].\n"
             "[[Файл:Flag of Esperanto.svg|міні|Прапор]] Мовою пишуть у [[Київ]]і.\n"
             "{{[[Шаблон:Не перекладено|Не перекладено]]}} Див. [[Вікіпедія:Мови]].\n"
             "[[Категорія:Мови| ]]\n[[Категорія:Штучні мови]]")
UK_DUMP = (UK_HEADER
           + _page(2, "Esperanto", "#REDIRECT [[Есперанто]]", redirect="Есперанто")
           + _page(3, "Есперанто", ESPERANTO)
           + _page(4, "Мова есперанто", "#ПЕРЕНАПРАВЛЕННЯ [[Есперанто]]")
           + _page(5, "Людвік Заменгоф", "'''Людвік Заменгоф''' створив [[Есперанто]].\n"
                   "Див. [[Мова есперанто|есперанто]], [[Мови світу]].\n"
                   "[[Категорія:Мовознавці]]")
           + _page(6, "Мови світу", "#перенапр [[Категорія:Мови]]")
           + _page(7, "Київ", "'''Київ''' — столиця.\n[[Категорія:Міста]]")
           + "</mediawiki>\n")
EN_DUMP = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" '
           'xml:lang="en">\n  <siteinfo><dbname>enwiki</dbname></siteinfo>\n'
           + _page(20, "Ore River", "The '''Ore River''' passes [[Port Alder]]s.\n"
                   "[[Category:Rivers]] [[Категорія:Not a category here]]")
           + "</mediawiki>\n")


def _entities(directory):
  out = {}
  for path in sorted(glob.glob(os.path.join(directory, f"{schema.ENTITIES_PREFIX}-*.tfrecord"))):
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
      feature = tf.train.Example.FromString(record).features.feature
      title = feature[schema.ENTITY_TITLE].bytes_list.value[0].decode()
      out[title] = [v.decode() for v in feature[schema.ENTITY_CATEGORIES].bytes_list.value]
  return out


@pytest.fixture(scope="module")
def run_output(tmp_path_factory):
  directory = tmp_path_factory.mktemp("inputs")
  plain = directory / "uk-plain.xml.bz2"
  plain.write_bytes(bz2.compress(UK_DUMP.encode("utf-8")))
  uk_path, _, _ = multistream_testutil.write_multistream(
      str(plain), str(directory), pages_per_stream=2,
      dump_name="ukwiki-20230601-pages-articles-multistream.xml.bz2",
      index_name="ukwiki-20230601-pages-articles-multistream-index.txt.bz2")
  os.remove(plain)
  en_path = directory / "enwiki-small.xml"
  en_path.write_text(EN_DUMP, encoding="utf-8")
  out = str(tmp_path_factory.mktemp("out"))
  stats = extract.run([uk_path, str(en_path)], out, range_bytes=1)
  return out, stats


def test_namespaces_categories_and_redirects_per_wiki(run_output):
  out, stats = run_output
  assert stats["multistream_ranges_read"] >= 3  # the Ukrainian pages came in byte ranges
  entities = _entities(out)
  assert entities["Есперанто"] == ["Мови", "Штучні мови"]
  assert entities["Людвік Заменгоф"] == ["Мовознавці"]
  assert entities["Ore River"] == ["Rivers"]
  # No title with a namespace prefix: not 'Категорія:..', 'Файл:..', 'Шаблон:..', the
  # redirect to a category, nor a redirect title.
  # ('Категорія:' is no namespace of English Wikipedia: an article title there.)
  assert set(entities) == {"Ore River", "Port Alder", "Есперанто", "Київ",
                           "Категорія:Not a category here", "Людвік Заменгоф"}
  assert entities["Київ"] == ["Міста"]
  assert stats["redirects"] == 3 and stats["redirects_to_other_namespace"] == 1
  with open(os.path.join(out, schema.REDIRECTS_FILE), encoding="utf-8") as f:
    redirects = sorted(line.rstrip("\n") for line in f)
  assert redirects == ["Esperanto\tЕсперанто", "Мова есперанто\tЕсперанто"]
  assert stats["links_dropped_category"] == 5 and stats["links_dropped_file"] == 1
  # The link to the category redirect is no mention (another namespace).
  assert stats["mentions_dropped_other_namespace"] == 1
