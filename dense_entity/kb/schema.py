"""Feature names of the records passed between stages (one module for Beam and tf.data).

Every TFRecord file in a workspace holds `tf.train.Example` protos whose features are named
here; WORKSPACE.md gives the paths and which stage writes and reads each file.

Mention features follow Gillick et al. (2019), section 4.1: the span text, the 5 tokens left and
right of it, and the sentence with the span replaced by `MENTION_MASK`. Entity features: title,
first paragraph (plain text) and categories (the paper's), and aliases (redirect titles; read
by the name channel only, modeling.config.ModelConfig.name_match_dim).
"""

# The symbol that replaces the mention span in the sentence feature (one token for the featurizer).
MENTION_MASK = "[MASK]"

# Number of tokens kept on each side of the span (paper, section 4.1).
CONTEXT_TOKENS = 5

# Separator of category names inside one string feature (MediaWiki forbids '|' in titles).
CATEGORY_SEPARATOR = "|"

# --- mention features (all bytes, one value each) ---
MENTION_SPAN = "mention_span"
MENTION_LEFT = "mention_left_context"
MENTION_RIGHT = "mention_right_context"
MENTION_SENTENCE = "mention_sentence"
MENTION_FEATURES = (MENTION_SPAN, MENTION_LEFT, MENTION_RIGHT, MENTION_SENTENCE)

# --- entity features ---
ENTITY_TITLE = "entity_title"  # bytes, normalized Wikipedia title (the entity id)
ENTITY_TEXT = "entity_text"  # bytes, first paragraph as plain text ('' when unknown)
ENTITY_CATEGORIES = "entity_categories"  # bytes list, normalized category names (no prefix)
# bytes list: redirect titles that resolve to this entity (its other names); '|'-joined like
# the categories when read by tf.data (records.py)
ENTITY_ALIASES = "entity_aliases"
ENTITY_FEATURES = (ENTITY_TITLE, ENTITY_TEXT, ENTITY_CATEGORIES, ENTITY_ALIASES)

# --- entity record only ---
ENTITY_SOURCE = "entity_source"  # bytes list, any of: 'page', 'link_target', 'description'

# --- mention record only ---
SOURCE_PAGE = "source_page"  # bytes, normalized title of the page the link is on
MENTION_ID = "mention_id"  # bytes, '<page id>:<link index>' unique within a dump
# bytes, where the link was written (LINK_SOURCES; '' in records of older extractions and of
# entity-linking datasets); training can keep some of them (TrainConfig.link_sources)
LINK_SOURCE = "link_source"
# The values of LINK_SOURCE (beam_pipelines.parsers.wikitext.Link.source): running text
# (paragraphs, headings, lists), a table cell or caption, a template parameter (infobox
# values, citations), a file caption, a gallery line.
LINK_SOURCES = ("prose", "table", "template", "caption", "gallery")

# File name prefixes inside the extraction output directory (see WORKSPACE.md).
ENTITIES_PREFIX = "entities"
TRAIN_MENTIONS_PREFIX = "mentions_train"
HELDOUT_MENTIONS_PREFIX = "mentions_heldout"
ALIAS_COUNTS_FILE = "alias_counts.tsv"
REDIRECTS_FILE = "redirects.tsv"
STATS_FILE = "stats.json"
MANIFEST_FILE = "MANIFEST.json"

# --- hard negative pair record (beam_pipelines/pipelines/mining.py) ---
# Mention features + the negative entity's ENTITY_FEATURES, plus:
GOLD_ENTITY = "gold_entity"  # bytes, the mention's gold entity (never equal to ENTITY_TITLE)
PAIR_LABEL = "pair_label"  # int64, 0 for a hard negative
MINING_ROUND = "mining_round"  # int64, the round that first found the pair
# int64, the gold entity's rank (0-based) among the k entities searched when the pair was mined,
# k when it was not among them; absent from pairs mined before it was recorded.
GOLD_RANK = "gold_rank"
NEGATIVES_PREFIX = "hard_negatives"
