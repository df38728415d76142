"""Dense entity retrieval (Gillick et al., CoNLL 2019, "DEER") as software people run."""

from setuptools import find_packages, setup

setup(
    name="dense-entity",
    version="0.1.0",
    description="Dense entity retrieval: dual-encoder entity linking over Wikipedia",
    python_requires=">=3.11,<3.12",
    packages=find_packages(include=["dense_entity", "dense_entity.*", "beam_pipelines",
                                    "beam_pipelines.*", "export", "export.*"]),
    install_requires=[
        "tensorflow==2.20.*",
        "tensorflow-text==2.20.*",
        "scann==1.4.2",
        "apache-beam==2.77.*",
        "google-crc32c>=1.5",  # Beam's TFRecord reader checks record CRCs with it
        "absl-py>=2.1",
        "numpy>=1.26",
        "mwparserfromhell==0.7.*",
        "lxml>=5.2,<7",  # HTML dumps: the article HTML's tree (parsers.html_article)
        "blingfire==0.1.8",
        "gensim==4.4.*",  # its wheel ships the real Wikipedia sample the demo reads
        "bm25s==0.3.*",
        "rdflib>=7.0",
        "tqdm>=4.66",
        "anyascii>=0.3",  # ASCII folding of Latin titles for the KB's matching key
        "matplotlib>=3.8",
    ],
    extras_require={
        "test": ["pytest>=8", "pytest-xdist>=3.5"],
        "bench": ["faiss-cpu>=1.8", "wikiextractor==3.1.*"],
    },
    entry_points={"console_scripts": ["dense-entity=dense_entity.cli:main"]},
)
