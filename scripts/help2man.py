#!/usr/bin/env python3
"""help2man.py TOOL NAME SUMMARY VERSION OUT: a man page (OUT, NAME.1) written from what `TOOL --help` prints, so that the two never
disagree. The usage lines become the synopsis, the rest the description, verbatim (the help is already laid out
for a terminal); the version is the project's."""
import datetime
import subprocess
import sys


def roff(text):
    out = text.replace("\\", "\\e")
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in out.splitlines())


def main():
    tool, name, summary, version, out_path = sys.argv[1:6]
    run = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=30)
    if run.returncode != 0:
        sys.stderr.write("help2man.py: %s --help exited %d\n" % (tool, run.returncode))
        return 1
    lines = (run.stdout or run.stderr).rstrip("\n").splitlines()
    usage = [line for line in lines if line.lstrip().startswith(("usage:", name)) and not line.startswith("  -")]
    body = [line for line in lines if line not in usage]
    date = datetime.date.today().strftime("%Y-%m")
    out = open(out_path, "w")

    def print(text):
        out.write(text + "\n")

    print('.TH "%s" 1 "%s" "softndk %s" "softndk tools"' % (name.upper(), date, version))
    print(".SH NAME")
    print("%s \\- %s" % (name, summary))
    print(".SH SYNOPSIS")
    print(".nf")
    print(roff("\n".join(line.strip().replace("usage: ", "", 1) for line in usage) or name))
    print(".fi")
    print(".SH DESCRIPTION")
    print(".nf")
    print(roff("\n".join(body)))
    print(".fi")
    print(".SH SEE ALSO")
    print("/usr/share/doc/softndk/README.md, /usr/share/doc/softndk/tools.md")
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
