"""Writes the Python-made gen-* files of thin2-docs (see generate.sh).

Usage: python3 gen_py.py OUTDIR, in a venv with pykeepass, python-docx,
python-pptx, openpyxl, XlsxWriter, odfpy and ezodf. Synthetic content only.
"""

import struct
import sys
import zlib
from pathlib import Path

out = Path(sys.argv[1])


def png(w, h, rgb):
    """A tiny solid-colour PNG, written by hand."""

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))

    raw = b"".join(b"\0" + bytes(rgb) * w for _ in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


(out / "_img.png").write_bytes(png(64, 48, (200, 40, 90)))
IMG = str(out / "_img.png")
WORDS = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do".split()


def kdbx():
    from pykeepass import create_database

    kp = create_database(str(out / "gen-pykeepass-empty.kdbx"), password="hunter2")
    kp.save()
    (out / "_pk.key").write_bytes(bytes(range(32)))
    kp = create_database(str(out / "gen-pykeepass-keyfile-entries.kdbx"), password="pw", keyfile=str(out / "_pk.key"))
    for g in range(5):
        grp = kp.add_group(kp.root_group, f"group{g}")
        for e in range(12):
            kp.add_entry(grp, f"entry{g}-{e}", f"user{e}", f"pass{g}{e}", url=f"https://example.org/{e}", notes=" ".join(WORDS[: e + 1]))
    kp.save()
    kp = create_database(str(out / "gen-pykeepass-attachment.kdbx"), password="hunter2")
    e = kp.add_entry(kp.root_group, "withfile", "me", "secret")
    bid = kp.add_binary(bytes(range(256)) * 200)
    e.add_attachment(bid, "blob.bin")
    kp.save()


def docx():
    import docx

    d = docx.Document()
    d.add_heading("gpucarve sample", 0)
    for i in range(30):
        d.add_paragraph(" ".join(WORDS[: 1 + i % 10]) + f" {i}", style="List Number" if i % 3 == 0 else None)
    t = d.add_table(rows=4, cols=3)
    for r in range(4):
        for c in range(3):
            t.cell(r, c).text = f"r{r}c{c}"
    d.add_picture(IMG)
    d.add_page_break()
    d.add_paragraph("second page")
    d.save(out / "gen-python-docx-table-picture.docx")


def pptx():
    from pptx import Presentation
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    p = Presentation()
    s = p.slides.add_slide(p.slide_layouts[0])
    s.shapes.title.text = "gpucarve sample"
    s.placeholders[1].text = "python-pptx"
    s = p.slides.add_slide(p.slide_layouts[5])
    s.shapes.title.text = "a chart (its data is an embedded xlsx)"
    cd = CategoryChartData()
    cd.categories = ["a", "b", "c"]
    cd.add_series("s1", (1.0, 2.5, 4.0))
    s.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(2), Inches(6), Inches(4), cd)
    s = p.slides.add_slide(p.slide_layouts[6])
    s.shapes.add_picture(IMG, Inches(1), Inches(1))
    p.save(out / "gen-python-pptx-chart-picture.pptx")


def xlsx():
    import openpyxl
    import xlsxwriter
    from openpyxl.chart import BarChart, Reference

    wb = openpyxl.Workbook()
    ws = wb.active
    for r in range(1, 51):
        ws.append([r, r * r, f"=A{r}+B{r}", WORDS[r % 10]])
    ch = BarChart()
    ch.add_data(Reference(ws, min_col=2, min_row=1, max_row=20))
    ws.add_chart(ch, "F2")
    wb.create_sheet("second")["A1"] = "second sheet"
    wb.save(out / "gen-openpyxl-formulas-chart.xlsx")
    wb = openpyxl.Workbook(write_only=True)
    ws = wb.create_sheet()
    for r in range(2000):
        ws.append([r, r / 7, WORDS[r % 10] * (1 + r % 3)])
    wb.save(out / "gen-openpyxl-write-only-2000-rows.xlsx")
    wb = xlsxwriter.Workbook(str(out / "gen-xlsxwriter-chart-image.xlsx"))
    ws = wb.add_worksheet()
    for r in range(30):
        ws.write_row(r, 0, [r, r * 3, WORDS[r % 10]])
    c = wb.add_chart({"type": "line"})
    c.add_series({"values": "=Sheet1!$B$1:$B$30"})
    ws.insert_chart("E2", c)
    ws.insert_image("E20", IMG)
    wb.close()
    wb = xlsxwriter.Workbook(str(out / "gen-xlsxwriter-constant-memory.xlsx"), {"constant_memory": True})
    ws = wb.add_worksheet("big")
    for r in range(3000):
        ws.write_row(r, 0, [r, f"row {r}", r * 0.5])
    wb.close()
    wb = xlsxwriter.Workbook(str(out / "gen-xlsxwriter-tiny.xlsx"))
    wb.add_worksheet().write("A1", 1)
    wb.close()


def odf():
    import ezodf
    from odf.draw import Frame, Image, Page, TextBox
    from odf.opendocument import OpenDocumentPresentation, OpenDocumentSpreadsheet, OpenDocumentText
    from odf.style import PageLayout, MasterPage
    from odf.table import Table, TableCell, TableColumn, TableRow
    from odf.text import H, P

    t = OpenDocumentText()
    t.text.addElement(H(outlinelevel=1, text="gpucarve sample"))
    for i in range(40):
        t.text.addElement(P(text=" ".join(WORDS[: 1 + i % 10])))
    t.save(str(out / "gen-odfpy-paragraphs.odt"))
    for n, rows in (("small", 5), ("500-rows", 500)):
        s = OpenDocumentSpreadsheet()
        tb = Table(name="Sheet1")
        tb.addElement(TableColumn())
        for r in range(rows):
            tr = TableRow()
            for c in range(3):
                cell = TableCell(valuetype="float", value=r * 10 + c)
                cell.addElement(P(text=str(r * 10 + c)))
                tr.addElement(cell)
            tb.addElement(tr)
        s.spreadsheet.addElement(tb)
        s.save(str(out / f"gen-odfpy-{n}.ods"))
    s = OpenDocumentSpreadsheet()
    for n in range(3):
        tb = Table(name=f"formulas{n}")
        for r in range(20):
            tr = TableRow()
            c1 = TableCell(valuetype="float", value=r)
            c1.addElement(P(text=str(r)))
            tr.addElement(c1)
            tr.addElement(TableCell(formula=f"of:=[.A{r + 1}]*{n + 2}", valuetype="float", value=r * (n + 2)))
            tr.addElement(TableCell(valuetype="string", stringvalue="text " * r))
            tr.addElement(TableCell(valuetype="date", datevalue=f"2026-01-{r + 1:02d}"))
            tb.addElement(tr)
        s.spreadsheet.addElement(tb)
    s.save(str(out / "gen-odfpy-3-sheets-formulas.ods"))
    pr = OpenDocumentPresentation()
    pl = PageLayout(name="PL")
    pr.automaticstyles.addElement(pl)
    mp = MasterPage(name="Default", pagelayoutname=pl)
    pr.masterstyles.addElement(mp)
    for i in range(4):
        pg = Page(masterpagename=mp)
        fr = Frame(width="20cm", height="3cm", x="2cm", y="2cm")
        tbx = TextBox()
        tbx.addElement(P(text=f"slide {i}: " + " ".join(WORDS)))
        fr.addElement(tbx)
        pg.addElement(fr)
        pr.presentation.addElement(pg)
    pr.save(str(out / "gen-odfpy-4-slides.odp"))
    pr = OpenDocumentPresentation()
    pl = PageLayout(name="PL")
    pr.automaticstyles.addElement(pl)
    mp = MasterPage(name="Default", pagelayoutname=pl)
    pr.masterstyles.addElement(mp)
    href = pr.addPicture(IMG)
    for i in range(30):
        pg = Page(masterpagename=mp)
        fr = Frame(width="6cm", height="4cm", x="2cm", y="2cm")
        fr.addElement(Image(href=href))
        pg.addElement(fr)
        pr.presentation.addElement(pg)
    pr.save(str(out / "gen-odfpy-30-slides-picture.odp"))
    for kind in ("odt", "ods", "odp"):
        d = ezodf.newdoc(doctype=kind, filename=str(out / f"gen-ezodf-new.{kind}"))
        if kind == "ods":
            sh = ezodf.Sheet("data", size=(20, 4))
            d.sheets += sh
            for r in range(20):
                sh[r, 0].set_value(r)
                sh[r, 1].set_value(f"text {r}")
            sh2 = ezodf.Sheet("formulas", size=(10, 2))
            d.sheets += sh2
            for r in range(10):
                sh2[r, 0].set_value(r * 1.5)
                sh2[r, 1].formula = f"of:=[.A{r + 1}]*2"
        elif kind == "odt":
            for i in range(10):
                d.body += ezodf.Paragraph(" ".join(WORDS[: i + 1]))
        d.save()
    OpenDocumentPresentation().save(str(out / "gen-odfpy-no-pages.odp"))
    d = ezodf.newdoc(doctype="ods", filename=str(out / "gen-ezodf-1000-cells.ods"))
    sh = ezodf.Sheet("big", size=(250, 4))
    d.sheets += sh
    for r in range(250):
        for c in range(4):
            sh[r, c].set_value(r * 4 + c if c % 2 else f"cell {r},{c}")
    d.save()


for f in (kdbx, docx, pptx, xlsx, odf):
    f()
for tmp in out.glob("_*"):
    tmp.unlink()
