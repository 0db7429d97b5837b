"""The repository stands on its own: no code, comment or test points at a document it does not hold.

Papers are cited by their own section, algorithm and equation numbers, and every choice the code
makes where a paper is open to reading is stated where it is made. Labels of notes kept outside
the repository (resolution and ambiguity numbers, their section signs, their file names) mean
nothing to a reader of the code, so none may appear.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("pipeline", "producers", "topologies", "tests", "helm", "docker", "Makefile", "pyproject.toml")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".json", ".txt", ".cfg", ".sh", ".tpl", ".ini", ""}
# Built from pieces so that this file does not match itself.
OUTSIDE = re.compile("|".join([
    r"\b(RES|AMB)-\d",  # numbered resolutions and ambiguities of outside notes
    r"\bRESOLVED A\d",
    r"\b[Ss]pecs?\b[^\n.]{0,40}" + "\u00a7",  # a section sign shortly after the word "spec"
    r"\b(ldp-ids|personalized-w-event|decayed-range-queries|kellaris-w-event)(\.md| \u00a7)",
    "ARCHITECTURE" + r"\.md",
    r"\[(A|S|ART|OURS)( BUG)?\]",  # the notes' tags for the two LDP-IDS versions and the artifact
    r"\bspec" + "s/", r"\bshared/(notes|spec" + "s|papers)",
]))


def scanned_files():
    for name in SCANNED:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            if file.suffix in TEXT_SUFFIXES and "__pycache__" not in file.parts and "fixtures" not in file.parts:
                yield file


def test_no_reference_to_a_document_outside_the_repository():
    found = []
    for file in scanned_files():
        if file == Path(__file__).resolve():
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{file.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "references outside the repository:\n" + "\n".join(found)


def test_the_pattern_catches_each_kind_of_outside_reference():
    section, notes = "\u00a7", "spec"  # joined here, so that this file holds no such reference itself
    for line in ("(" + "RES" + "-3)", "AMB" + "-12", "RESOLVED" + " A5", f"{notes} {section}3.6a",
                 f"{notes} ldp-ids {section}4.7", f"Spec {section}2.4's check", "ldp-ids" + ".md",
                 f"personalized-w-event {section}10.1", "ARCHITECTURE" + ".md " + section + "3",
                 "[" + "A] Algorithm 4", "[" + "S] Table 2", "[" + "ART BUG]", "shared/" + "spec" + "s/ldp-ids.md"):
        assert OUTSIDE.search(line), line
    for line in ("Kellaris et al. 2014, Section 4.3", "paper[a]", "Algorithm 3 of the SIGMOD version",
                 "spec = importlib.util.spec_from_file_location(name, path)"):
        assert not OUTSIDE.search(line), line
