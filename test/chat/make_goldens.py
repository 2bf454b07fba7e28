#!/usr/bin/env python3
"""Regenerates the chat-template goldens from llama.cpp itself (the oracle, ../shared/oracle):
for every built-in template name and every conversation in conv/, the render with and without
the assistant's turn opened: golden/CONV/NAME.add and golden/CONV/NAME.noadd (raw bytes).

  ZFX_LIBDIR=/tmp/fh/oracle/lib/cpu test/chat/make_goldens.py /tmp/fh/oracle/zfx
"""
import json, os, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
zfx = sys.argv[1]
names = subprocess.run([zfx, "templates"], check=True, capture_output=True, text=True).stdout.split()
with open(os.path.join(here, "names.txt"), "w") as f:
    f.write("\n".join(names) + "\n")

def oracle_conv(msgs):
    esc = lambda s: s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
    return "".join(esc(m["role"]) + "\t" + esc(m["content"]) + "\n" for m in msgs)

for fn in sorted(os.listdir(os.path.join(here, "conv"))):
    conv = fn[:-5]
    msgs = json.load(open(os.path.join(here, "conv", fn), encoding="utf-8"))
    out = os.path.join(here, "golden", conv)
    os.makedirs(out, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".tsv") as t:
        t.write(oracle_conv(msgs)); t.flush()
        for name in names:
            for add, tag in ((1, "add"), (0, "noadd")):
                r = subprocess.run([zfx, "chat", name, t.name, str(add)], check=True, capture_output=True)
                open(os.path.join(out, name + "." + tag), "wb").write(r.stdout)
print(f"{len(names)} names x {len(os.listdir(os.path.join(here, 'conv')))} conversations x 2")
