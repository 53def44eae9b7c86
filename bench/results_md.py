"""bench/RESULTS.md's sections: the reports of the benchmarks with a table of their own add rows
under their heading, creating the section (heading, introduction, table header) the first time."""
import os


def add_section_rows(path, heading, intro, rows):
    """Appends `rows` (table lines) at the end of the table under `heading` in the file `path`;
    when the heading is missing, first appends it with `intro` (its text and table header)."""
    lines = open(path).read().splitlines() if os.path.exists(path) else ["# Benchmark results"]
    if heading not in lines:
        lines += ["", heading, ""] + intro.strip("\n").split("\n")
    at = lines.index(heading) + 1
    while at < len(lines) and not lines[at].startswith("|"):
        at += 1
    while at < len(lines) and lines[at].startswith("|"):
        at += 1
    lines[at:at] = rows
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
