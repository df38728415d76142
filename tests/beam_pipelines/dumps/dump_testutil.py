"""Small MediaWiki exports built inline for tests: page_xml (one <page>), dump (the export)."""

_NS = "http://www.mediawiki.org/xml/export-0.11/"


def page_xml(page_id, title, text, ns=0, redirect=None):
  redirect_xml = f'<redirect title="{redirect}" />' if redirect else ""
  return (f"<page><title>{title}</title><ns>{ns}</ns><id>{page_id}</id>{redirect_xml}"
          f"<revision><id>{page_id + 1000}</id><text xml:space=\"preserve\">{text}</text>"
          "</revision></page>\n").encode("utf-8")


def dump(*pages, header=f'<mediawiki xmlns="{_NS}" version="0.11">\n'):
  return header.encode() + b"".join(pages) + b"</mediawiki>\n"
