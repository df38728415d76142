"""Reading dumps: pages out of MediaWiki XML exports and HTML dumps, nothing parsed.

  xml_dump     Page, DumpError, open_dump (plain, bz2, a byte range of a multistream file),
               parse_page_xml, iter_pages (streaming, one bad page reported and skipped)
  multistream  the multistream index: its file names, reading its stream offsets, pairing
               index files with dumps, planning byte ranges of whole bz2 streams
  html_dump    HtmlPage, HTML dumps (NDJSON in Wikimedia Enterprise layout; plain, gzip,
               bz2): iter_pages (streaming, one bad line reported with file and line and
               skipped), check_dump_start, sniff_format (HTML dump or XML, by content)
  read_ahead   whole bz2 dumps decompressed in threads while a local run builds its
               pipeline, taken by the reading step (decompressed_ahead, take)
  samples      the path of the packaged default input (gensim's Wikipedia sample)

No Beam here: beam_pipelines.pipelines reads dumps through these functions.

May import: any dense_entity library package (none is needed today); never
beam_pipelines.parsers or beam_pipelines.pipelines (layers above), nor an entry point.
"""
