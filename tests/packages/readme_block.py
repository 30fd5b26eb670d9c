"""Prints one fenced code block of a README section, so the tests run exactly what the README says.

    python3 readme_block.py README.md "Install" python 1   # the first ```python block under "## Install"

The section runs from its `## ` heading to the next `## ` heading. Exits 1 naming what is missing."""

from __future__ import annotations

import sys


def block(text: str, section: str, lang: str, nth: int) -> str:
    inside = False
    found = 0
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith("## "):
            inside = line[3:].strip() == section
            continue
        if inside and line.strip() == f"```{lang}":
            found += 1
            body = []
            for body_line in lines:
                if body_line.strip() == "```":
                    break
                body.append(body_line)
            if found == nth:
                return "\n".join(body) + "\n"
    raise LookupError(f"README section {section!r} has no code block #{nth} of language {lang!r}")


if __name__ == "__main__":
    path, section, lang, nth = sys.argv[1:5]
    try:
        sys.stdout.write(block(open(path, encoding="utf-8").read(), section, lang, int(nth)))
    except LookupError as e:
        sys.exit(str(e))
