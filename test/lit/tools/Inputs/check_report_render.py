#!/usr/bin/env python3
"""Renders a run report page in headless Chromium and checks that its loss plot is drawn.

Usage: check_report_render.py PAGE.html OUT.png

Chromium (Debian package `chromium`, listed in scripts/setup.sh; $CHROMIUM names another
binary) takes a screenshot of the page; the PNG is decoded here with zlib alone. The loss
plot is the first plot of the page (runtime/train/Report.cpp): its training curve and points
are drawn in #1f77b4 and the validation loss in #d62728; elsewhere these colours appear only
in the legend's swatches (14 x 3 px each; legend text is dark and the other plots and the
memory bars use other colours). The check counts the pixels within 40 per channel of each
colour (anti-aliased edges blend toward the white background; 40 keeps the stroke's core and
leaves out greys) and requires at least MIN_PIXELS of each. Curves are 3 px thick, so at
least 2 pixels of each column they cross are fully covered: the training curve spans the
620 px plot box (over 1200 px) and the validation curve of the test's run (steps 2 to 8 of
1 to 8) 530 px of it (over 1000 px), while a page whose curves failed to render leaves only
the swatches (about 42 px). Fails with one clear line when no Chromium is installed or it does
not write the screenshot.
"""
import os
import shutil
import struct
import subprocess
import sys
import zlib

MIN_PIXELS = 600  # between a legend swatch (about 42 px) and the shorter curve (over 1000 px)
COLOURS = {"training loss": (0x1F, 0x77, 0xB4), "validation loss": (0xD6, 0x27, 0x28)}


def find_chromium():
    for name in [os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome",
                 "headless_shell"]:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def read_png(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):  # undo the PNG filter of this row (PNG spec section 9)
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def main():
    page, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    chromium = find_chromium()
    if not chromium:
        print("FAIL: headless Chromium not found (install the Debian package `chromium`: scripts/setup.sh "
              "lists it; or set CHROMIUM to a Chromium binary)")
        return 1
    if os.path.exists(out):
        os.remove(out)
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--window-size=800,1000", f"--screenshot={os.path.abspath(out)}", "file://" + page]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        print(f"FAIL: {chromium} took more than 120 s to take the screenshot")
        return 1
    if not os.path.exists(out):
        print(f"FAIL: {chromium} wrote no screenshot (exit {r.returncode}): {r.stdout.strip()[-500:]}")
        return 1
    width, height, rows = read_png(out)
    problems = 0
    for label, (cr, cg, cb) in COLOURS.items():
        n = sum(1 for row in rows for (r_, g, b) in row
                if abs(r_ - cr) <= 40 and abs(g - cg) <= 40 and abs(b - cb) <= 40)
        ok = n >= MIN_PIXELS
        problems += not ok
        print(f"{'ok' if ok else 'FAIL'}: {label}: {n} pixels of its colour in the {width}x{height} screenshot "
              f"(at least {MIN_PIXELS})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
