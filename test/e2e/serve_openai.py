"""ds-serve answering the `openai` Python client, judged by HF (tokenizers, chat template,
greedy `generate`) and by itself served one request at a time.

    python serve_openai.py --bin BUILD/bin --work DIR

A small Llama whose vocabulary is a Llama-3-style tokenizer's (trained by HF `tokenizers`),
with a ChatML template and <|im_end|> as its end-of-sequence (generation_config.json), is
compiled by ds-opt --inference (4 rows, 1024 cached tokens) and served on loopback. Checks:
/v1/models; a completion and a streamed chat completion equal to HF's greedy text; 32
concurrent requests of mixed lengths (some streamed) equal to the same requests served one at
a time; a too-long prompt refused with 400; a full queue refused with 503 while the admitted
requests complete; SIGTERM during streams: every stream finishes, new connections are refused,
the process exits 0. Prints one line per check; exits 1 on a failure.
"""
import argparse
import concurrent.futures as cf
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import openai
import torch
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_template_compare import LLAMA2  # noqa: E402
from export_causal_lm import make  # noqa: E402
from tokenizer_compare import write_tokenizer  # noqa: E402

WORDS = ('the compiler splits every model over ranks and pages its cache while requests '
         'join and leave the running batch ünïcödé 你好 12345 tokens').split()
failed = False


def check(ok, line):
    global failed
    failed |= not ok
    print(line if ok else 'FAILED: ' + line, flush=True)


def serve(a, gen, *flags):
    p = subprocess.Popen([os.path.join(a.bin, 'ds-serve'), gen, '--port', '0', *flags],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()  # "ds-serve: NAME on http://127.0.0.1:PORT (...)"
    port = int(line.split('127.0.0.1:')[1].split()[0])
    return p, f'http://127.0.0.1:{port}'


def post(url, body, path='/v1/completions', method='POST'):
    if isinstance(body, int):  # a request announcing `body` bytes, refused before they come
        host, port = url.split('//')[1].split(':')
        with socket.create_connection((host, int(port)), timeout=60) as c:
            c.sendall(f'{method} {path} HTTP/1.1\r\nContent-Length: {body}\r\n\r\n'.encode())
            reply = b''
            while chunk := c.recv(65536):
                reply += chunk
        head, _, answer = reply.partition(b'\r\n\r\n')
        return int(head.split()[1]), json.loads(answer)
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data, {'Content-Type': 'application/json'},
                                 method=method)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    a = ap.parse_args()
    tok_path = write_tokenizer('llama3', a.work)
    tok = Tokenizer.from_file(tok_path)
    hf_tok = PreTrainedTokenizerFast(tokenizer_file=tok_path, bos_token='<|begin_of_text|>',
                                     eos_token='<|im_end|>')
    hf_tok.add_special_tokens({'additional_special_tokens': ['<|im_start|>', '<|im_end|>']})
    hf_tok.chat_template = LLAMA2  # which raises on roles that do not alternate
    hf_tok.save_pretrained(a.work)
    tok = Tokenizer.from_file(tok_path)  # with the chat tokens HF added
    vocab = tok.get_vocab_size()
    eos = tok.token_to_id('<|im_end|>')
    with open(os.path.join(a.work, 'generation_config.json'), 'w') as f:
        json.dump({'eos_token_id': eos}, f)
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, 'export_causal_lm.py'), '--family',
                    'llama', '--out', a.work, '--vocab', str(vocab)], check=True)
    config = os.path.join(a.work, 'gen.json')
    with open(config, 'w') as f:
        json.dump({'dtype': 'fp32', 'max_tokens': 1024, 'max_batch': 4, 'page_size': 16,
                   'prefill_chunk': 32}, f)
    gen = os.path.join(a.work, 'gen.mlir')
    subprocess.run([os.path.join(a.bin, 'ds-opt'), os.path.join(a.work, 'llama.pt2'),
                    '--inference', '--config', config, '-o', gen], check=True)
    model = make('llama', vocab)
    model.generation_config.eos_token_id = eos

    def hf_greedy(ids, new):
        x = torch.tensor([ids])
        with torch.no_grad():
            out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=new,
                                 do_sample=False, pad_token_id=0)
        return tok.decode(out[0, len(ids):].tolist(), skip_special_tokens=True)

    server, url = serve(a, gen)
    client = openai.OpenAI(base_url=url + '/v1', api_key='none', max_retries=0)
    try:
        names = [m.id for m in client.models.list().data]
        check(names == ['gen'], f'/v1/models lists {names}')

        prompt = 'The compiler splits the model over ranks'
        r = client.completions.create(model='gen', prompt=prompt, max_tokens=24, temperature=0)
        want = hf_greedy(tok.encode(prompt).ids, 24)
        check(r.choices[0].text == want and r.usage.prompt_tokens == len(tok.encode(prompt).ids),
              f'completion: text equal to HF generate ({r.usage.completion_tokens} tokens, '
              f'finish_reason {r.choices[0].finish_reason})')

        # A stop string (the text of two consecutive new tokens): the text ends before it,
        # whole or streamed (where its first token's text must be held back).
        ids = tok.encode(prompt).ids
        x = torch.tensor([ids])
        with torch.no_grad():
            new_ids = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=24,
                                     do_sample=False, pad_token_id=0)[0, len(ids):].tolist()
        full = tok.decode(new_ids, skip_special_tokens=True)
        # Two tokens of whole characters each, first met where they stand.
        for k in range(3, len(new_ids) - 1):
            a_, b_ = (tok.decode([t], skip_special_tokens=True) for t in new_ids[k:k + 2])
            head = tok.decode(new_ids[:k], skip_special_tokens=True)
            if a_ and b_ and '\ufffd' not in a_ + b_ + head and full.find(a_ + b_) == len(head):
                break
        stop = a_ + b_
        want = head
        whole = client.completions.create(model='gen', prompt=prompt, max_tokens=24,
                                          temperature=0, stop=[stop])
        streamed = ''.join(c.choices[0].text for c in client.completions.create(
            model='gen', prompt=prompt, max_tokens=24, temperature=0, stop=[stop], stream=True))
        check(whole.choices[0].text == want and streamed == want and
              whole.choices[0].finish_reason == 'stop',
              f'stop {stop!r}: the text ends before it, whole and streamed (finish_reason '
              f'{whole.choices[0].finish_reason})')

        messages = [{'role': 'system', 'content': 'Be brief.'},
                    {'role': 'user', 'content': 'What does ds do with the cache?'}]
        stream = client.chat.completions.create(model='gen', messages=messages, max_tokens=24,
                                                temperature=0, stream=True)
        parts, finish = [], None
        for chunk in stream:
            parts.append(chunk.choices[0].delta.content or '')
            finish = chunk.choices[0].finish_reason or finish
        chat_prompt = hf_tok.apply_chat_template(messages, tokenize=False,
                                                 add_generation_prompt=True)
        want = hf_greedy(tok.encode(chat_prompt, add_special_tokens=False).ids, 24)
        check(''.join(parts) == want, f'streamed chat completion: text equal to HF generate '
              f'with apply_chat_template ({len(parts)} chunks, finish_reason {finish})')

        rng = random.Random(5)
        reqs = [(' '.join(rng.choice(WORDS) for _ in range(rng.randrange(1, 40))),
                 rng.randrange(4, 48), k % 3 == 0) for k in range(32)]

        def one(req):
            text, new, streamed = req
            if not streamed:
                return client.completions.create(model='gen', prompt=text, max_tokens=new,
                                                 temperature=0).choices[0].text
            s = client.completions.create(model='gen', prompt=text, max_tokens=new,
                                          temperature=0, stream=True)
            return ''.join(c.choices[0].text for c in s)

        t0 = time.time()
        with cf.ThreadPoolExecutor(32) as pool:
            together = list(pool.map(one, reqs))
        t1 = time.time()
        alone = [one(r) for r in reqs]
        t2 = time.time()
        same = sum(x == y for x, y in zip(together, alone))
        check(same == 32, f'32 concurrent requests (prompts of 1-40 words, 4-47 new tokens, a '
              f'third streamed): {same}/32 texts equal to each served alone '
              f'({t1 - t0:.1f} s together, {t2 - t1:.1f} s one at a time)')

        try:
            client.completions.create(model='gen', prompt='word ' * 1100, max_tokens=8)
            check(False, 'a too-long prompt was served')
        except openai.BadRequestError as e:
            check(e.status_code == 400 and 'maximum context length' in str(e),
                  'a too-long prompt: 400 (maximum context length)')

        # Every refusal: its status and its message.
        chat = '/v1/chat/completions'
        refusals = [
            ('/nope', 'GET', None, 404, 'no route /nope'),
            ('/v1/completions', 'GET', None, 405, 'takes POST'),
            ('/v1/completions', 'POST', b'not json', 400, 'not a JSON object'),
            ('/v1/completions', 'POST', 17 << 20, 413, 'Payload Too Large'),
            ('/v1/completions', 'POST', {}, 400, "'prompt' is required"),
            ('/v1/completions', 'POST', {'prompt': {'a': 1}}, 400, "'prompt' must be a string"),
            ('/v1/completions', 'POST', {'prompt': [[]]}, 400, 'the prompt is empty'),
            ('/v1/completions', 'POST', {'prompt': [5, vocab]}, 400, 'outside the vocabulary'),
            ('/v1/completions', 'POST', {'prompt': 'x', 'n': 2}, 400, "'n' must be"),
            ('/v1/completions', 'POST', {'prompt': 'x', 'max_tokens': 0}, 400,
             "'max_tokens' must be a positive integer"),
            ('/v1/completions', 'POST', {'prompt': 'x', 'temperature': 5}, 400,
             "'temperature' must be a number from 0 to 2"),
            ('/v1/completions', 'POST', {'prompt': 'x', 'logprobs': 2}, 400,
             "'logprobs' is not supported"),
            (chat, 'POST', {'messages': []}, 400, "'messages' must be a non-empty array"),
            (chat, 'POST', {'messages': [{'role': 'user', 'content': 5}]}, 400,
             "each message needs a 'role' and a text 'content'"),
            (chat, 'POST', {'messages': [{'role': 'user', 'content': 'a'},
                                         {'role': 'user', 'content': 'b'}]}, 400,
             "the model's chat template refused the messages: Conversation roles must alternate"),
        ]
        wrong = []
        for path, method, body, status, text in refusals:
            code, answer = post(url, body, path, method)
            if code != status or text not in answer['error']['message']:
                wrong.append(f'{method} {path}: {code} {answer}')
        check(not wrong, f'{len(refusals) - len(wrong)}/{len(refusals)} refusals with their '
              f'status and message{": " + "; ".join(wrong) if wrong else ""}')
    finally:
        server.terminate()
        server.wait(timeout=60)

    # Without a tokenizer: token ids only, and no chat.
    bare = os.path.join(a.work, 'bare')
    os.makedirs(bare, exist_ok=True)
    for ext in ('.mlir', '.safetensors'):
        shutil.copy(gen[:-len('.mlir')] + ext, os.path.join(bare, 'gen' + ext))
    server, url = serve(a, os.path.join(bare, 'gen.mlir'))
    try:
        text = post(url, {'prompt': 'hello'})
        ids = post(url, {'prompt': [5, 6], 'max_tokens': 3, 'temperature': 0})
        talk = post(url, {'messages': [{'role': 'user', 'content': 'hi'}]},
                    '/v1/chat/completions')
        check(text[0] == 400 and 'token ids only' in text[1]['error']['message'] and
              ids[0] == 200 and len(ids[1]['choices'][0]['text'].split()) == 3 and
              talk[0] == 400 and 'no chat template' in talk[1]['error']['message'],
              f"without a tokenizer: text refused ({text[0]}), ids served as ids "
              f"({ids[1]['choices'][0]['text']!r}), chat refused ({talk[0]})")
    finally:
        server.terminate()
        server.wait(timeout=60)

    # A queue of 2 behind 4 rows and 1024 cached tokens: 12 requests of 300 new tokens at
    # once; at most 3 fit the cache, 2 wait, the rest are refused.
    server, url = serve(a, gen, '--max-queue', '2')
    with cf.ThreadPoolExecutor(12) as pool:
        results = list(pool.map(lambda k: post(url, {'prompt': [5, 6, k + 7], 'max_tokens': 300,
                                                     'temperature': 0, 'ignore_eos': True}),
                                range(12)))
    codes = sorted(c for c, _ in results)
    done = [b for c, b in results if c == 200]
    check(codes.count(503) >= 1 and all(b['usage']['completion_tokens'] == 300 for b in done)
          and set(codes) == {200, 503},
          f'a full queue: {codes.count(503)} of 12 refused with 503, {len(done)} completed '
          f'with 300 tokens each')

    # SIGTERM while four streams run: they finish, new connections are refused, exit 0.
    streams = [openai.OpenAI(base_url=url + '/v1', api_key='none', max_retries=0)
               .completions.create(model='gen', prompt=[5, k + 1], max_tokens=200, stream=True,
                                   temperature=0, extra_body={'ignore_eos': True})
               for k in range(4)]
    firsts = [next(iter(s)) for s in streams]
    server.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    try:
        urllib.request.urlopen(url + '/health', timeout=5)
        refused = False
    except (urllib.error.URLError, ConnectionError):
        refused = True
    finished = []
    for s in streams:
        last = None
        for chunk in s:
            last = chunk.choices[0].finish_reason or last
        finished.append(last)
    code = server.wait(timeout=60)
    check(len(firsts) == 4 and finished == ['length'] * 4 and refused and code == 0,
          f'SIGTERM during 4 streams: {finished.count("length")}/4 finished, new connections '
          f"{'refused' if refused else 'ACCEPTED'}, exit code {code}")
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
