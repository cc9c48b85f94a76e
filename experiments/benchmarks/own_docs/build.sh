#!/usr/bin/env bash
# A folder of real mixed documents for `dataset=files` (issue 36's done-when check and
# experiments/benchmarks/parse_bench.py): Debian's manuals as PDF, SQLite's manual pages as HTML (and a few
# of them converted to DOCX by pandoc), Markdown READMEs from PyPI sdists, the RAGBench paper as
# PDF/HTML/DOCX, and the bad files of tests/fixtures/files. Licences: experiments/benchmarks/own_docs/README.md.
#
#   bash experiments/benchmarks/own_docs/build.sh [OUT]      # default experiments/data/own_docs (git-ignored)
# needs: apt-get (Debian 12), pip, pandoc (apt-get install pandoc)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"; ROOT="$(cd "$HERE/../../.." && pwd)"
OUT="${1:-$ROOT/experiments/data/own_docs}"
WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
apt-get download -q sqlite3-doc maint-guide developers-reference debian-reference-en debian-faq >/dev/null
for d in *.deb; do dpkg -x "$d" x/; done
python3 -m pip download -q --no-deps --no-binary :all: pypdf==7.1.1 pdfminer.six==20260107 python-docx==1.2.0 mammoth==1.13.0 -d sd >/dev/null
for s in sd/*.tar.gz; do tar xzf "$s" -C sd; done
rm -rf "$OUT"; mkdir -p "$OUT"/{manuals,sqlite,word,notes,paper,bad}
cp x/usr/share/doc/maint-guide/maint-guide.en.pdf x/usr/share/developers-reference/developers-reference.pdf \
   x/usr/share/debian-reference/debian-reference.en.pdf "$OUT/manuals/"
gunzip -c x/usr/share/doc/debian/FAQ/debian-faq.en.pdf.gz > "$OUT/manuals/debian-faq.en.pdf"
cp sd/pypdf-7.1.1/resources/crazyones.pdf sd/pypdf-7.1.1/resources/pdflatex-outline.pdf "$OUT/manuals/"
S=x/usr/share/doc/sqlite3
for p in about quickstart datatype3 lang_select lang_insert lang_update lang_delete lang_createtable lang_createindex \
         lang_transaction lang_vacuum lang_attach lang_expr lang_upsert wal faq whentouse limits fts5 json1 pragma \
         foreignkeys autoinc atomiccommit lockingv3 isolation queryplanner optoverview windowfunctions backup; do
  cp "$S/$p.html" "$OUT/sqlite/"
done
for p in lang_with lang_altertable rtree uri tempfiles; do   # real Word files, made by pandoc from real pages
  pandoc -f html -t docx "$S/$p.html" -o "$OUT/word/sqlite_$p.docx"
done
cp sd/python_docx-1.2.0/tests/test_files/test.docx "$OUT/word/python_docx_test.docx"
cp sd/pypdf-7.1.1/README.md "$OUT/notes/pypdf_README.md"; cp sd/pypdf-7.1.1/CHANGELOG.md "$OUT/notes/pypdf_CHANGELOG.md"
cp sd/pdfminer_six-20260107/README.md "$OUT/notes/pdfminer_README.md"
cp sd/mammoth-1.13.0/README.md "$OUT/notes/mammoth_README.md" 2>/dev/null || true
cp sd/python_docx-1.2.0/README.md "$OUT/notes/python_docx_README.md" 2>/dev/null || true
cp "$ROOT"/tests/fixtures/files/paper/ragbench_paper.* "$OUT/paper/"
cp "$ROOT"/tests/fixtures/files/bad/{encrypted.pdf,scanned.pdf,truncated.pdf,sqlite_logo.gif} "$OUT/bad/"
echo "$OUT: $(find "$OUT" -type f | wc -l) files, $(du -sh "$OUT" | cut -f1)"
