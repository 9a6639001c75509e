#!/bin/bash
# Writes the gen-* files of corpora/wild/thin2-docs from synthetic input or
# Debian 12 documentation. Usage: generate.sh OUTDIR (a fresh, empty folder).
# Tools (Debian 12): keepassxc 2.7.4 (keepassxc-cli), libhivex-bin 1.3.23
# (hivexsh; python3-hivex for one file), abiword 3.0.5,
# latex2rtf 2.3.18, enscript 1.6.5.90, gnumeric 1.12.55 (ssconvert), pandoc 2.17.1.1,
# LibreOffice 7.4.7 (libreoffice-{writer,calc,impress}-nogui); Python 3 venv: pykeepass, python-docx, python-pptx, openpyxl,
# XlsxWriter, odfpy, ezodf (versions in MANIFEST.tsv), running gen_py.py.
# KeePass keys, passwords and timestamps are random, so a rerun writes
# different bytes (the MANIFEST's sha256 is of the committed files).
set -euo pipefail
out=$(realpath "$1"); here=$(dirname "$(realpath "$0")")
work=$(mktemp -d); cd "$work"

# --- KDBX 4 by keepassxc-cli: password, key file, both, entries, attachment, XML import
pw() { printf '%s\n%s\n' "$1" "$1"; }
pw hunter2 | keepassxc-cli db-create -q -p "$out/gen-kpxc-password.kdbx"
keepassxc-cli db-create -q --set-key-file kpxc.key "$out/gen-kpxc-keyfile.kdbx"
pw both | keepassxc-cli db-create -q -p --set-key-file kpxc2.key "$out/gen-kpxc-password-keyfile.kdbx"
pw hunter2 | keepassxc-cli db-create -q -p -t 100 "$out/gen-kpxc-entries.kdbx"
for i in 1 2 3 4 5 6 7 8; do
  keepassxc-cli mkdir -q "$out/gen-kpxc-entries.kdbx" "group$i" <<< hunter2
  printf 'hunter2\npass%s\n' "$i" | keepassxc-cli add -q -u "user$i" --url "https://example.org/$i" -p "$out/gen-kpxc-entries.kdbx" "group$i/entry$i"
done
pw hunter2 | keepassxc-cli db-create -q -p "$out/gen-kpxc-attachment.kdbx"
printf 'hunter2\nx\n' | keepassxc-cli add -q -u someone -p "$out/gen-kpxc-attachment.kdbx" withfile
zcat -f /usr/share/doc/gzip/README* | head -c 20000 > att.txt
keepassxc-cli attachment-import -q "$out/gen-kpxc-attachment.kdbx" withfile att.txt att.txt <<< hunter2

# --- registry hives: hivex 1.3.23 edits a copy of nt-hive's offreg-written testhive
base="$here/../thin/nthive2-testhive"
hive() { cp "$base" "$out/$1"; hivexsh -w "$out/$1" > /dev/null; }
hive gen-hivex-addkeys.hive <<'H'
add gpucarve
cd gpucarve
add sub1
add sub2
setval 3
str
string:plain string
dword
dword:0x12345678
bin
hex:3:00010203040506070809
commit
H
python3 -c "import sys; print('add many'); print('cd many'); [print(f'add key{i:04d}') for i in range(120)]; print('commit')" > many.cmd
hive gen-hivex-120-subkeys.hive < many.cmd
# a 25,600-byte value (a big-data "db" cell: hivexsh's input line is too short, so python3-hivex)
cp "$base" "$out/gen-hivex-bigdata-value.hive"
/usr/bin/python3 -c "
import hivex, sys
h = hivex.Hivex(sys.argv[1], write=True)
n = h.node_add_child(h.root(), 'big')
h.node_set_value(n, {'key': 'blob', 't': 3, 'value': bytes(range(256)) * 100})
h.commit(None)" "$out/gen-hivex-bigdata-value.hive"
hive gen-hivex-delete-subtree.hive <<'H'
add doomed
cd doomed
add child1
add child2
cd ..
add kept
cd doomed
del
commit
H
python3 -c "
print('add vals'); print('cd vals'); print('setval 40')
for i in range(40): print(f'v{i}'); print(f'string:value number {i} ' + 'x'*i)
print('commit')" > vals.cmd
hive gen-hivex-40-values.hive < vals.cmd
hive gen-hivex-value-types.hive <<'H'
add types
cd types
setval 7
@
string:default value
exp
expandstring:%SystemRoot%\system32
q
qword:0x0123456789abcdef
multi
hex:7:61,00,62,00,00,00,63,00,00,00,00,00
none
none
be
hex:5:12,34,56,78
link
hex:6:5c,00,41,00
commit
H
python3 -c "
for i in range(24): print(f'add level{i}'); print(f'cd level{i}')
print('setval 1'); print('deep'); print('dword:24'); print('commit')" > deep.cmd
hive gen-hivex-24-levels-deep.hive < deep.cmd

# --- RTF: AbiWord, latex2rtf, enscript
zcat -f /usr/share/doc/gzip/README* > gzip-README.txt
abiword --to=rtf -o "$out/gen-abiword-gzip-README.rtf" gzip-README.txt
pandoc -s -t html -o table.html "$here/src-table.md"
abiword --to=rtf -o "$out/gen-abiword-table.rtf" table.html
cat > doc.tex <<'T'
\documentclass{article}
\title{gpucarve sample}\author{corpus}
\begin{document}\maketitle
\section{Lists and maths}
\begin{itemize}\item one \item two \item \textbf{bold} and \emph{italic}\end{itemize}
$E = mc^2$ and $\sum_{i=1}^{n} i = \frac{n(n+1)}{2}$.
\begin{tabular}{|l|r|}\hline a & 1 \\ b & 2 \\ \hline\end{tabular}
\section{Unicode}
Caf\'e, na\"ive, \ss, \o.
\end{document}
T
latex2rtf -o "$out/gen-latex2rtf-article.rtf" doc.tex 2>/dev/null
printf '\\documentclass{letter}\\begin{document}\\begin{letter}{Someone\\\\Street 1}\\opening{Dear reader,}A short letter.\\closing{Yours}\\end{letter}\\end{document}\n' > letter.tex
latex2rtf -o "$out/gen-latex2rtf-letter.rtf" letter.tex 2>/dev/null
printf '\\documentclass{report}\\begin{document}\\chapter{One}Text\\footnote{A footnote.} and a reference to eq.~\\ref{e}.\\begin{equation}\\label{e}a^2+b^2=c^2\\end{equation}\\begin{verbatim}\nverbatim  text\n\\end{verbatim}\\chapter{Two}\\begin{enumerate}\\item x\\item y\\end{enumerate}\\end{document}\n' > report.tex
latex2rtf -o "$out/gen-latex2rtf-report-footnote.rtf" report.tex 2>/dev/null
enscript -q -w rtf -p "$out/gen-enscript-gzip-README.rtf" gzip-README.txt
enscript -q -w rtf -E -Ec -p "$out/gen-enscript-highlight-c.rtf" "$here/src-hello.c"

# --- OOXML / ODF: pandoc, AbiWord, and the Python writers (gen_py.py)
pandoc -s -o "$out/gen-pandoc-table.docx" "$here/src-table.md"
pandoc -s -o "$out/gen-pandoc-table.odt" "$here/src-table.md"
pandoc -s -o "$out/gen-pandoc-table.pptx" "$here/src-table.md"
abiword --to=docx -o "$out/gen-abiword-table.docx" table.html
abiword --to=odt -o "$out/gen-abiword-table.odt" table.html
abiword --to=rtf -o "$out/gen-abiword-from-docx.rtf" "$out/gen-pandoc-table.docx"

# --- Gnumeric 1.12.55 ssconvert: ODS and XLSX from CSV
python3 -c "
import math
print('x,sin,cos,label')
for i in range(200): print(f'{i},{math.sin(i/10):.6f},{math.cos(i/10):.6f},row{i}')" > data.csv
ssconvert -T Gnumeric_OpenCalc:odf data.csv "$out/gen-gnumeric-200-rows.ods" 2>/dev/null
printf 'a,b\n1,2\n' > tiny.csv
ssconvert -T Gnumeric_OpenCalc:odf tiny.csv "$out/gen-gnumeric-tiny.ods" 2>/dev/null
ssconvert -T Gnumeric_OpenCalc:openoffice data.csv "$out/gen-gnumeric-strict-200-rows.ods" 2>/dev/null
ssconvert -T Gnumeric_Excel:xlsx2 data.csv "$out/gen-gnumeric-200-rows.xlsx" 2>/dev/null
ssconvert --merge-to="$out/gen-gnumeric-two-sheets.ods" -T Gnumeric_OpenCalc:odf data.csv tiny.csv 2>/dev/null
ssconvert -T Gnumeric_Excel:xlsx tiny.csv "$out/gen-gnumeric-ecma1-tiny.xlsx" 2>/dev/null
python3 "$here/gen_py.py" "$out"

# --- LibreOffice 7.4.7 (headless): ODP, ODS, ODT, PPTX, DOCX, XLSX, RTF
lo() { # lo FORMAT[:FILTER] INPUT OUTNAME
  rm -rf lo-out; soffice -env:UserInstallation=file://$work/lo-profile --headless \
    --convert-to "$1" --outdir lo-out "$2" > /dev/null 2>&1
  mv lo-out/* "$out/$3"
}
lo odp "$out/gen-pandoc-table.pptx" gen-lo-from-pandoc-pptx.odp
lo odp "$out/gen-python-pptx-chart-picture.pptx" gen-lo-from-python-pptx-chart.odp
for n in sld-notes shp-groupshape test-image-jpg-mime no-slides; do
  lo odp "$here/pythonpptx-$n.pptx" "gen-lo-from-pythonpptx-$n.odp"
done
lo pptx "$here/odfpy-ol.odp" gen-lo-from-odfpy-ol.pptx
lo pptx "$here/odfpy-cols.odp" gen-lo-from-odfpy-cols.pptx
lo docx "$out/gen-abiword-table.odt" gen-lo-from-abiword-odt.docx
lo docx "$here/odfpy-images.odt" gen-lo-from-odfpy-images.docx
lo xlsx data.csv gen-lo-from-csv.xlsx
lo xlsx "$here/odfpy-pythagoras.ods" gen-lo-from-odfpy-pythagoras.xlsx
lo ods data.csv gen-lo-from-csv.ods
lo ods "$out/gen-openpyxl-formulas-chart.xlsx" gen-lo-from-openpyxl-chart.ods
lo odt "$out/gen-pandoc-table.docx" gen-lo-from-pandoc-docx.odt
lo odt "$here/pythondocx-test.docx" gen-lo-from-pythondocx-test.odt
lo 'rtf:Rich Text Format' "$out/gen-pandoc-table.odt" gen-lo-from-pandoc-odt.rtf
lo 'rtf:Rich Text Format' "$here/pythondocx-hdr-header-footer.docx" gen-lo-from-pythondocx-hdr.rtf
rm -rf "$work"
