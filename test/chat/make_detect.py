#!/usr/bin/env python3
"""detect/expected.tsv: for each template text in detect/ (tNN: the templates of llama.cpp tests/test-chat-template.cpp, sNN: synthetic ones for the other families), the built-in names whose render equals the oracle's render of that text (zfx chat @FILE) on every conversation of conv/ (UNKNOWN: llama.cpp renders nothing). Run in detect/ with names.tsv (file<TAB>label):  ZFX_LIBDIR=... make_detect.py"""
import json, os, subprocess, sys
zfx='/tmp/fh/oracle/zfx'; G=os.path.dirname(os.path.abspath(__file__))
names=open(G+'/names.txt').read().split()
convs=sorted(f[:-5] for f in os.listdir(G+'/conv'))
esc=lambda s: s.replace("\\","\\\\").replace("\n","\\n").replace("\t","\\t")
tsv={}
for c in convs:
    msgs=json.load(open(f'{G}/conv/{c}.json'))
    p=f'/tmp/{c}.tsv'; open(p,'w').write("".join(esc(m['role'])+"\t"+esc(m['content'])+"\n" for m in msgs)); tsv[c]=p
for line in open('names.tsv'):
    fn,label=line.rstrip('\n').split('\t')
    cands=set(names)
    unsupported=False
    for c in convs:
        for add in (0,1):
            r=subprocess.run([zfx,'chat','@'+fn,tsv[c],str(add)],capture_output=True)
            if r.returncode: unsupported=True; break
            cands={n for n in cands if open(f'{G}/golden/{c}/{n}.{"add" if add else "noadd"}','rb').read()==r.stdout}
        if unsupported: break
    print(fn, 'UNKNOWN' if unsupported else ','.join(sorted(cands)) or 'NONE', label, sep='\t')
