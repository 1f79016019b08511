"""ds-tokenize (ds's tokenizer.json reader, lib/Tokenizer) against HF `tokenizers` itself.

Builds tokenizer.json files of the shapes HF models ship (GPT-2's byte-level BPE, Qwen2's
(NFC, its split pattern, byte-level), Llama 3's (its pattern with \\p{N}{1,3}, ignore_merges, a
BOS template), Llama 2's (SentencePiece-style: a prepended and replaced U+2581, byte
fallback, a BOS template) and Mistral's older Metaspace pre-tokenizer), each trained by HF
`tokenizers` on the same text, then encodes texts and decodes ids with both, and prints how
many of each were equal: texts in English, code, many scripts, emoji, numbers, runs of
spaces and newlines, embedded special tokens; random id sequences (invalid UTF-8 in byte
tokens included).
"""
import argparse
import json
import os
import random
import subprocess

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
         r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3 = QWEN2.replace(r"|\p{N}|", r"|\p{N}{1,3}|")
SAMPLES = [
    'Hello world', ' leading space', 'trailing space ', '  two  spaces  ', '\n\nnewlines\n',
    "I'll DON'T we've They'RE it's", 'numbers 12345 3.14159 1,000,000 007',
    'tabs\tand\r\nCRLF', 'Ünïcödé façade naïve café — “quotes” ‘single’',
    'e\u0301 composed?', '你好世界，这是一个测试。', '日本語のテキストです。', 'مرحبا بالعالم',
    'Привет, мир!', '👍🏽 emoji 🚀🚀 😀!', 'def f(x):\n    return x ** 2  # square\n',
    '<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n',
    '<|begin_of_text|>text<|eot_id|>', '<s>sentence</s> <unk>', 'x' * 300, ' ' * 40 + 'y',
    '\u00a0nbsp\u2003em space\u3000ideographic', 'ſtraße ǅ ﬁ', '', ' ', '\n',
]


def corpus():
    text = []
    for name in ('README.md', 'docs/design/inference.md'):
        path = os.path.join(HERE, '..', '..', name)
        text += open(path, encoding='utf-8').read().split('\n')
    return text + SAMPLES[:16]


def byte_level(split, specials, nfc=False, ignore_merges=False, bos=None):
    t = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        t.normalizer = normalizers.NFC()
    if split:
        t.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split), behavior='isolated'),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(corpus(), trainers.BpeTrainer(
        vocab_size=800, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if bos:
        t.post_processor = processors.TemplateProcessing(
            single=bos + ' $A', special_tokens=[(bos, t.token_to_id(bos))])
    else:
        t.post_processor = processors.ByteLevel(trim_offsets=False)
    return t


def sentencepiece(metaspace):
    t = Tokenizer(models.BPE(unk_token='<unk>', byte_fallback=True, fuse_unk=True))
    if metaspace:
        t.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme='first', split=False)
        t.decoder = decoders.Metaspace(prepend_scheme='first', split=False)
    else:
        t.normalizer = normalizers.Sequence([normalizers.Prepend('\u2581'),
                                             normalizers.Replace(' ', '\u2581')])
        t.decoder = decoders.Sequence([decoders.Replace('\u2581', ' '), decoders.ByteFallback(),
                                       decoders.Fuse(), decoders.Strip(' ', 1, 0)])
    t.train_from_iterator(corpus(), trainers.BpeTrainer(
        vocab_size=700, special_tokens=['<unk>', '<s>', '</s>'], show_progress=False,
        limit_alphabet=120))
    t.post_processor = processors.TemplateProcessing(single='<s> $A', special_tokens=[('<s>', 1)])
    # The 256 byte tokens join the vocabulary (not the added tokens), as in Llama 2's file.
    j = json.loads(t.to_str())
    vocab = j['model']['vocab']
    for b in range(256):
        vocab.setdefault('<0x%02X>' % b, len(vocab))
    return Tokenizer.from_str(json.dumps(j))


FAMILIES = {
    'gpt2': lambda: byte_level(None, ['<|endoftext|>']),
    'qwen2': lambda: byte_level(QWEN2, ['<|endoftext|>', '<|im_start|>', '<|im_end|>'],
                                nfc=True),
    'llama3': lambda: byte_level(LLAMA3, ['<|begin_of_text|>', '<|end_of_text|>', '<|eot_id|>'],
                                 ignore_merges=True, bos='<|begin_of_text|>'),
    'llama2': lambda: sentencepiece(False),
    'mistral': lambda: sentencepiece(True),
}


def write_tokenizer(family, work):
    """Trains `family`'s tokenizer into WORK/tokenizer.json; returns the path."""
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, 'tokenizer.json')
    FAMILIES[family]().save(path)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--family', choices=sorted(FAMILIES), required=True)
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    a = ap.parse_args()
    hf = FAMILIES[a.family]()
    path = os.path.join(a.work, a.family + '.tokenizer.json')
    hf.save(path)
    hf = Tokenizer.from_file(path)  # the judge reads the same file ds reads
    rng = random.Random(1)
    texts = SAMPLES + [' '.join(rng.sample(SAMPLES, 4)) for _ in range(40)]
    vocab = hf.get_vocab_size()
    id_lists = [[rng.randrange(vocab) for _ in range(rng.randrange(1, 30))] for _ in range(200)]

    def ds(lines, *flags):
        out = subprocess.run([os.path.join(a.bin, 'ds-tokenize'), path, '--jsonl', *flags],
                             input=''.join(json.dumps(x) + '\n' for x in lines),
                             capture_output=True, text=True, check=True).stdout
        return [json.loads(x) for x in out.splitlines()]

    checks = [
        ('encoded texts', ds(texts), [hf.encode(t).ids for t in texts]),
        ('encoded without special tokens', ds(texts, '--no-special'),
         [hf.encode(t, add_special_tokens=False).ids for t in texts]),
        ('decoded random ids', ds(id_lists), [hf.decode(i, skip_special_tokens=False)
                                             for i in id_lists]),
        ('decoded, special skipped', ds(id_lists, '--skip-special'),
         [hf.decode(i, skip_special_tokens=True) for i in id_lists]),
    ]
    encoded = [hf.encode(t).ids for t in texts]
    checks.append(('round trips', ds(encoded, '--skip-special'),
                   [hf.decode(i, skip_special_tokens=True) for i in encoded]))
    for what, got, want in checks:
        equal = sum(g == w for g, w in zip(got, want))
        print(f'{a.family}: {what}: {equal}/{len(want)} equal to HF tokenizers')
        for g, w, x in zip(got, want, texts if 'encoded' in what else id_lists):
            if g != w:
                print(f'  differs on {x!r}:\n    ds {g!r}\n    HF {w!r}')
                break


if __name__ == '__main__':
    main()
