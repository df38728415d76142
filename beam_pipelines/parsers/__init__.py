"""Pure functions from a dump's pages to the extraction's records; no Beam here.

  namespaces    link and redirect targets: namespace / interwiki classification of a title,
                normalize_target, redirect_target of a page, per wiki (Site, from the dump's
                <siteinfo>: localized namespaces, redirect words, link trail, title case)
  wikitext      the wikitext renderer: parse_article -> plain text, links, categories, first
                paragraph (mwparserfromhell)
  html_article  the HTML renderer: parse_html_article (Parsoid or classic rendered HTML, lxml)
                -> the same ParsedArticle as wikitext; which links are mentions, link_title
  page_kinds    pages that are no entities (disambiguation pages: __DISAMBIG__, templates,
                categories, title) and categories that are no features (hidden:
                __HIDDENCAT__ category pages, maintenance-category names)
  pages         one dump page -> what the extraction makes of it (PageParser: tagged outputs,
                encoded mentions, counts, skip reason), and the parse step's worker-process
                functions (init_worker, parse_pages)
  mentions      a rendered article's links -> mentions with their contexts (span, left, right,
                sentence; paper section 5)
  descriptions  a line of the entity-descriptions JSONL -> (title, text)
  title_lists   lines of title lists and redirect lists (the KB beyond the dumps)
  records       the records passed between the extraction's steps (MentionTuple,
                MentionPayload: a mention with its own features already encoded,
                ArticleTuple, Entity) and their tf.train.Example encodings
                (dense_entity.kb.schema features), as protos or, without them, as bytes

Each step is tested on 3-10 line inputs; beam_pipelines.pipelines composes them into graphs.

May import: beam_pipelines.dumps and any dense_entity library package; never
beam_pipelines.pipelines (the layer above), nor an entry point.
"""
