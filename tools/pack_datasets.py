"""One-off converter: ../shared/data -> bedl_torch/datasets/data (the data shipped in the package).

Usage (from the repository root)::

    python tools/pack_datasets.py [--shared ../shared/data] [--out bedl_torch/datasets/data]

Writes, deterministically (same input -> same bytes):

- ``<name>.jsonl.gz`` for minipalindrome, sorting, cystic, leukemia: one JSON object per line,
  files sorted by name: ``{"file": "ImplAAA.json", "y": 0, "nodes": [...], "adj": [[...], ...]}``.
- ``sentiment.jsonl.gz``: the binary Stanford Sentiment Treebank (root label 0/1 -> y=0,
  3/4 -> y=1, 2 dropped), train then dev then test, each in file order:
  ``{"file": "train.txt", "line": 1, "root": 3, "y": 1, "ptb": "(3 (2 It) ...)"}`` (the PTB line
  verbatim, parsed at load time).
- ``glove_6B_50d_sst.npz``: ``words`` (unicode array, V) and ``vectors`` (float32, V x 50), the
  GloVe 6B 50d vectors of the SST vocabulary, in the order of the source text file.
- ``<name>.ATTRIBUTION.txt`` per data set (and ``glove``): packaging notes + the source facts
  (verbatim SOURCE.txt), and a copy of the GPLv3 text of the repository the tree data come from.
"""
import argparse
import gzip
import io
import json
import pathlib
import re
import sys
import zipfile

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bedl_torch.tree import Tree, ptb_root_label  # noqa: E402

MINIPALINDROME_CLASSES = ["AAA", "AAB", "ABA", "ABB", "BAA", "BAB", "BBA", "BBB"]


def class_of(name: str, filename: str) -> int:
    """Class label of a data file, as stated in the data set's SOURCE.txt."""
    if name in ("cystic", "leukemia"):
        if filename.startswith("-1_"):
            return 0
        if filename.startswith("1_"):
            return 1
    elif name == "minipalindrome":
        m = re.match(r"Impl([AB]{3})", filename)
        if m:
            return MINIPALINDROME_CLASSES.index(m.group(1))
    elif name == "sorting":
        if filename.startswith("Bubble"):
            return 0
        if filename.startswith("Insertion"):
            return 1
    raise ValueError(f"{name}: cannot tell the class of {filename}")


def write_jsonl_gz(path: pathlib.Path, records) -> None:
    raw = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as f:
        f.write(raw.encode("utf-8"))
    path.write_bytes(buf.getvalue())


def write_npz(path: pathlib.Path, arrays: dict) -> None:
    """Like np.savez_compressed, but with fixed timestamps so that the bytes are reproducible."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for key, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue(), compresslevel=9)


def attribution(header: str, source_txt: pathlib.Path) -> str:
    return (
        header.strip()
        + "\n\n---- Source facts (verbatim copy of SOURCE.txt from the project's data folder) ----\n\n"
        + source_txt.read_text(encoding="utf-8")
    )


TREE_HEADER = """\
Packaged as bedl_torch/datasets/data/{name}.jsonl.gz by tools/pack_datasets.py: one JSON object per
line with the file name, the class label y and the tree ("nodes" = preorder labels, "adj" = ordered
children), files sorted by name. Trees are unchanged. Load with bedl_torch.datasets.load("{name}").
Class labels: {classes}.
License note: the trees come from the repository named below, whose code is GPLv3 (copy in
LICENSE-adversarial-edit-attacks-GPLv3.md next to this file); no separate license is stated for the
data files themselves. Please cite the original data sources (see below and the BEDL paper:
Paassen, Gallicchio, Micheli, Hammer, "Tree Edit Distance Learning via Adaptive Symbol
Embeddings", ICML 2018).
"""

CLASS_TEXT = {
    "cystic": "file prefix '-1_' -> 0, '1_' -> 1",
    "leukemia": "file prefix '-1_' -> 0, '1_' -> 1",
    "minipalindrome": "ImplXYZ -> index of XYZ in AAA, AAB, ABA, ABB, BAA, BAB, BBA, BBB (0..7)",
    "sorting": "Bubble* -> 0, Insertion* -> 1",
}

SENTIMENT_HEADER = """\
Packaged as bedl_torch/datasets/data/sentiment.jsonl.gz by tools/pack_datasets.py: the binary
Stanford Sentiment Treebank. Every PTB line of trees/train.txt, dev.txt and test.txt (in this order)
whose root label is 0, 1 (y = 0, negative) or 3, 4 (y = 1, positive) is stored verbatim with its
file name, line number and root label; root label 2 (neutral) is dropped. 9613 trees in all.
bedl_torch.datasets.load("sentiment") parses them with Tree.from_ptb: leaves are the words
(lowercased, -LRB-/-RRB-/... mapped to brackets), inner nodes are unlabeled (None).
Please cite: Socher, Perelygin, Wu, Chuang, Manning, Ng, Potts, "Recursive Deep Models for Semantic
Compositionality Over a Sentiment Treebank", EMNLP 2013.
License note: no license file was found in the repository the files were taken from, and SST's
upstream terms could not be checked (see below).
"""

GLOVE_HEADER = """\
Packaged as bedl_torch/datasets/data/glove_6B_50d_sst.npz by tools/pack_datasets.py: arrays
"words" (V unicode strings) and "vectors" (float32, V x 50) read from glove.6B.50d.sst_vocab.txt,
the GloVe 6B 50d vectors of every lowercased SST word that GloVe 6B has (V = 17756).
Load with bedl_torch.datasets.load_glove_subset().
Please cite: Pennington, Socher, Manning, "GloVe: Global Vectors for Word Representation",
EMNLP 2014. The GloVe vectors are under the Public Domain Dedication and License (PDDL 1.0).
"""


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--out", default=str(REPO / "bedl_torch" / "datasets" / "data"))
    args = ap.parse_args(argv)
    src = pathlib.Path(args.shared)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    for name in ("minipalindrome", "sorting", "cystic", "leukemia"):
        records = []
        for path in sorted((src / name).glob("*.json"), key=lambda p: p.name):
            tree = Tree.load_json(path)  # validates
            records.append({"file": path.name, "y": class_of(name, path.name), **tree.to_json()})
        write_jsonl_gz(out / f"{name}.jsonl.gz", records)
        (out / f"{name}.ATTRIBUTION.txt").write_text(
            attribution(TREE_HEADER.format(name=name, classes=CLASS_TEXT[name]), src / name / "SOURCE.txt"),
            encoding="utf-8",
        )
        counts = np.bincount([r["y"] for r in records])
        print(f"{name}: {len(records)} trees, class counts {counts.tolist()}")

    records = []
    for split in ("train", "dev", "test"):
        lines = (src / "sst" / "trees" / f"{split}.txt").read_text(encoding="utf-8").splitlines()
        for k, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            root = ptb_root_label(line)
            if root == 2:
                continue
            Tree.from_ptb(line)  # validates
            records.append({"file": f"{split}.txt", "line": k, "root": root,
                            "y": 0 if root < 2 else 1, "ptb": line})
    write_jsonl_gz(out / "sentiment.jsonl.gz", records)
    (out / "sentiment.ATTRIBUTION.txt").write_text(
        attribution(SENTIMENT_HEADER, src / "sst" / "SOURCE.txt"), encoding="utf-8"
    )
    print(f"sentiment: {len(records)} trees, class counts {np.bincount([r['y'] for r in records]).tolist()}")

    words, vecs = [], []
    with open(src / "glove" / "glove.6B.50d.sst_vocab.txt", encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split(" ")
            if len(parts) != 51:
                raise ValueError(f"bad GloVe line: {line[:60]!r}")
            words.append(parts[0])
            vecs.append([float(v) for v in parts[1:]])
    write_npz(out / "glove_6B_50d_sst.npz",
              {"words": np.array(words, dtype=str), "vectors": np.array(vecs, dtype=np.float32)})
    (out / "glove.ATTRIBUTION.txt").write_text(
        attribution(GLOVE_HEADER, src / "glove" / "SOURCE.txt"), encoding="utf-8"
    )
    print(f"glove: {len(words)} words")

    lic = src / "LICENSE-adversarial-edit-attacks-GPLv3.md"
    (out / lic.name).write_bytes(lic.read_bytes())


if __name__ == "__main__":
    main()
