#!/usr/bin/env python3
"""Writes the tribunal(1) man page from the binary's own --help and --version (docs/running.md,
"Manual page"), so the page says what the build says: one section per command with its options,
defaults and ranges, and an ENVIRONMENT section of the TRIBUNAL_* variables the options read.

Usage: tools/gen_man.py PATH/TO/tribunal [-o tribunal.1]
Read it with `man -l tribunal.1`. Python's standard library only; not a build step.
"""
import argparse
import datetime
import re
import subprocess
import sys


def run(binary, *args):
    return subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout


def sections(text):
    """CLI11's help text → (description, usage, {section title: [(term, help)]})."""
    lines = text.splitlines()
    description, usage, parts, title = [], "", {}, None
    for line in lines:
        if line.startswith("Usage: "):
            usage = line[len("Usage: "):]
        elif re.match(r"^[A-Z][A-Za-z ]*:$", line):
            title = line[:-1]
            parts[title] = []
        elif title is None:
            if line.strip():
                description.append(line.strip())
        elif re.match(r"^  \S", line):  # an entry: the term, then two or more spaces and its help
            term, _, rest = line.strip().partition("  ")
            parts[title].append([term.strip(), rest.strip()])
        elif line.startswith("   ") and parts.get(title):  # the help of a term too long for its column
            entry = parts[title][-1]
            entry[1] = (entry[1] + " " + line.strip()).strip()
        elif line.strip() and title:  # the footer
            description.append(line.strip())
    return " ".join(description), usage, parts


def roff(text):
    """Escapes text for roff: backslashes, leading dots and quotes, hyphens of options."""
    text = text.replace("\\", "\\e")
    text = re.sub(r"(?<![\w])-", r"\\-", text)
    if text.startswith((".", "'")):
        text = "\\&" + text
    # Non-ASCII characters (—, ×, ≥) as groff's \[uXXXX]: the page needs no input encoding.
    return "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in text)


def command_page(binary, path, out, environment):
    description, usage, parts = sections(run(binary, *path, "--help"))
    name = " ".join(["tribunal", *path])
    out.append(f'.SS "{roff(name)}"')
    out.append(roff(description))
    out.append(".PP")
    out.append(f"\\fB{roff(usage)}\\fR")
    for title in ("Positionals", "Options"):
        for term, help_text in parts.get(title, []):
            if term.startswith("-h,--help"):
                continue
            out.append(".TP")
            out.append(f"\\fB{roff(term)}\\fR")
            out.append(roff(help_text))
            for env in re.findall(r"\(Env:(\w+)\)", term):
                environment.setdefault(env, []).append((name, term.split()[0]))
    for term, _ in parts.get("Subcommands", []):
        command_page(binary, [*path, term], out, environment)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("-o", "--out", default="-")
    args = parser.parse_args()

    version = run(args.binary, "--version").splitlines()
    description, usage, parts = sections(run(args.binary, "--help"))
    date = datetime.date.today().isoformat()
    out = [
        f'.TH TRIBUNAL 1 "{date}" "{roff(version[0])}" "User Commands"',
        ".SH NAME",
        "tribunal \\- refereed delegation of ML training",
        ".SH SYNOPSIS",
        "\\fBtribunal\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR]",
        ".br",
        "\\fBtribunal help\\fR \\fICOMMAND\\fR",
        ".br",
        "\\fBtribunal \\-\\-version\\fR",
        ".SH DESCRIPTION",
        roff(description),
        ".SH COMMANDS",
    ]
    for term, help_text in parts.get("Subcommands", []):
        out += [".TP", f"\\fB{roff(term)}\\fR", roff(help_text)]
    out.append(".SH OPTIONS")
    environment = {}
    for term, _ in parts.get("Subcommands", []):
        command_page(args.binary, [term], out, environment)
    out.append(".SH ENVIRONMENT")
    out.append("An option's variable is read when the option is not given on the command line.")
    for env in sorted(environment):
        uses = ", ".join(f"{flag} of {name}" for name, flag in environment[env])
        out += [".TP", f"\\fB{env}\\fR", roff(uses)]
    out += [
        ".TP",
        "\\fBTRIBUNAL_SIMD\\fR",
        roff("forces the kernels' SIMD path (scalar, avx2, avx512, neon), as --simd does"),
        ".SH VERSION",
    ]
    for line in version:
        out += [roff(line), ".br"]
    out += [".SH SEE ALSO", "docs/running.md in the tribunal source tree."]
    text = "\n".join(out) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
