#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_tokenizer (test/fuzz/corpus_tokenizer): small SentencePiece
and byte-level BPE vocabularies (one per pre-tokenizer family) with byte, control and
user-defined tokens, each followed by a text. Input layout: see fuzz_tokenizer.c."""
import struct, sys, os

def s(b): b = b.encode() if isinstance(b, str) else b; return struct.pack('<Q', len(b)) + b
def kv_str(k, v): return s(k) + struct.pack('<I', 8) + s(v)
def kv_u32(k, v): return s(k) + struct.pack('<II', 4, v)
def kv_bool(k, v): return s(k) + struct.pack('<IB', 7, v)
def kv_arr_str(k, vs): return s(k) + struct.pack('<IIQ', 9, 8, len(vs)) + b''.join(s(v) for v in vs)
def kv_arr_f32(k, vs): return s(k) + struct.pack('<IIQ', 9, 6, len(vs)) + b''.join(struct.pack('<f', v) for v in vs)
def kv_arr_i32(k, vs): return s(k) + struct.pack('<IIQ', 9, 5, len(vs)) + b''.join(struct.pack('<i', v) for v in vs)
def gguf(kvs): return b'GGUF' + struct.pack('<IQQ', 3, 0, len(kvs)) + b''.join(kvs)
def seed(flags, file, text):
    t = text.encode() if isinstance(text, str) else text
    return bytes([flags]) + struct.pack('<H', len(t)) + file + t

TEXT = "Hello world, the ab <|user|> x<tool>y \u00fc\u4e16 123 4567 \t\n  don't I'M"

def spm():
    toks = ['<unk>', '<s>', '</s>'] + ['<0x%02X>' % i for i in range(256)] + \
           ['\u2581', '\u2581a', 'ab', '\u2581the', '\u2581t', 'he', '<|user|>', '<tool>', 'll', '\u2581He', 'llo']
    types = [2, 3, 3] + [6] * 256 + [1, 1, 1, 1, 1, 1, 3, 4, 1, 1, 1]
    scores = [0.0] * 259 + [-float(i) for i in range(len(toks) - 259)]
    return gguf([kv_str('tokenizer.ggml.model', 'llama'), kv_arr_str('tokenizer.ggml.tokens', toks),
                 kv_arr_f32('tokenizer.ggml.scores', scores), kv_arr_i32('tokenizer.ggml.token_type', types),
                 kv_u32('tokenizer.ggml.bos_token_id', 1), kv_u32('tokenizer.ggml.eos_token_id', 2)])

def byte_alphabet():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs: bs.append(b); cs.append(256 + n); n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]

def bpe(pre):
    alpha = byte_alphabet()
    merges = ['\u0120 t', 'h e', '\u0120t he', 'a b', 'l l', 'e ll', 'H ell', 'o r', 'w or', '\u0120 w']
    toks = alpha + [m.replace(' ', '') for m in merges] + ['<|endoftext|>', '<|user|>', '<tool>']
    seen, uniq = set(), []
    for t in toks:
        if t not in seen: seen.add(t); uniq.append(t)
    types = [1] * len(uniq)
    types[uniq.index('<|endoftext|>')] = 3; types[uniq.index('<|user|>')] = 3; types[uniq.index('<tool>')] = 4
    kvs = [kv_str('tokenizer.ggml.model', 'gpt2'), kv_arr_str('tokenizer.ggml.tokens', uniq),
           kv_arr_i32('tokenizer.ggml.token_type', types), kv_arr_str('tokenizer.ggml.merges', merges),
           kv_u32('tokenizer.ggml.bos_token_id', uniq.index('<|endoftext|>')),
           kv_u32('tokenizer.ggml.eos_token_id', uniq.index('<|endoftext|>')), kv_bool('tokenizer.ggml.add_bos_token', 1)]
    if pre: kvs.insert(1, kv_str('tokenizer.ggml.pre', pre))
    return gguf(kvs)

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), 'corpus_tokenizer')
os.makedirs(out, exist_ok=True)
files = {'spm': seed(3, spm(), TEXT), 'spm-plain': seed(0, spm(), "  a  ab\u2581"), 'bpe-none': seed(1, bpe(None), TEXT)}
for pre in ['default', 'llama-bpe', 'qwen2', 'gpt-2', 'deepseek-llm', 'deepseek-coder', 'falcon', 'starcoder',
            'tekken', 'gpt-4o', 'poro-chat', 'viking', 'seed-coder', 'bailingmoe', 'deepseek-v3', 'dbrx', 'chatglm-bpe', 'grok-2']:
    files['bpe-' + pre] = seed(7, bpe(pre), TEXT)
for name, data in files.items():
    with open(os.path.join(out, name + '.bin'), 'wb') as f: f.write(data)
