"""ds's chat templates (lib/Tokenizer/ChatTemplate.cpp, as ds-tokenize --chat) against
transformers' apply_chat_template (Jinja itself), on templates in the styles HF models ship
(ChatML as Qwen2's, Llama 3's, Llama 2's with its role check, and one using the rest of what
ds renders: namespace, tojson, for-else, loop filters, inline if, tests, comments, '+'/'-'
whitespace control), each with several conversations, with and without the generation
prompt. A template that raises must raise in both. Prints one line per template.

    python chat_template_compare.py --bin BUILD/bin --work DIR
"""
import argparse
import json
import os
import subprocess
import sys

from transformers import PreTrainedTokenizerFast

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_compare import write_tokenizer  # noqa: E402

CHATML = (
    "{%- for message in messages %}{%- if loop.first and messages[0]['role'] != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}")
LLAMA2 = """{% if messages[0]['role'] == 'system' %}
    {% set loop_messages = messages[1:] %}
    {% set system_message = messages[0]['content'] %}
{% else %}
    {% set loop_messages = messages %}
    {% set system_message = false %}
{% endif %}
{% for message in loop_messages %}
    {% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{ raise_exception('Conversation roles must alternate user/assistant/user/...') }}
    {% endif %}
    {% if loop.index0 == 0 and system_message != false %}
        {% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}
    {% else %}
        {% set content = message['content'] %}
    {% endif %}
    {% if message['role'] == 'user' %}
        {{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}
    {% elif message['role'] == 'assistant' %}
        {{ ' '  + content.strip() + ' ' + eos_token }}
    {% endif %}
{% endfor %}
"""
FEATURES = """{#- every other construct ds renders -#}
{%- set ns = namespace(count=0, chars=0) -%}
{%- for m in messages if m.role != 'system' -%}
  {%- set ns.count = ns.count + 1 -%}
  {%- set ns.chars = ns.chars + m.content | length -%}
  [{{ loop.index }}/{{ loop.length }}{{ ' first' if loop.first }}] {{ m.role | upper }}: {{ m['content'] | replace('a', 'A') }}
  {%+ if loop.last %}(last, {{ loop.revindex0 }}){% endif %}
{% else %}
(no turns)
{% endfor %}
{{- 'count=' ~ ns.count ~ ' chars=' ~ ns.chars }} {{ {'n': ns.count, 'ok': true, 'x': 2.5, 'z': none, 'l': [1, 'two']} | tojson }}
{% if tools is defined %}tools{% elif messages[-1].role is string and messages | length > 1 %}many{% else %}one{% endif %}
{{ messages[0].content.split(' ')[0] | default('empty', true) }} {{ (7 // 2) }} {{ 7 % 3 }} {{ -7 // 2 }} {{ 'yes' if 'sys' in messages[0].role else 'no' }}
{%- if add_generation_prompt %}
<assistant>{% endif %}"""
TEMPLATES = {'chatml': CHATML, 'llama3': LLAMA3, 'llama2': LLAMA2, 'features': FEATURES}
CONVERSATIONS = [
    [{'role': 'user', 'content': 'Hello!'}],
    [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'What is ds?'}],
    [{'role': 'system', 'content': 'You answer in French.'},
     {'role': 'user', 'content': '  Say hi  '}, {'role': 'assistant', 'content': 'Salut !'},
     {'role': 'user', 'content': 'Ünïcödé 你好 👍\nsecond line'}],
    [{'role': 'user', 'content': 'a'}, {'role': 'assistant', 'content': 'b'},
     {'role': 'user', 'content': 'a banana'}],
    [{'role': 'user', 'content': 'one'}, {'role': 'user', 'content': 'two'}],
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    a = ap.parse_args()
    tok_path = write_tokenizer('llama3', a.work)
    failed = False
    for name, template in TEMPLATES.items():
        d = os.path.join(a.work, name)
        hf = PreTrainedTokenizerFast(tokenizer_file=tok_path, bos_token='<|begin_of_text|>',
                                     eos_token='<|eot_id|>')
        hf.chat_template = template
        hf.save_pretrained(d)  # tokenizer_config.json (and chat_template.jinja) as HF writes
        cases, want = [], []
        for conv in CONVERSATIONS:
            for gen in (False, True):
                cases.append({'messages': conv, 'add_generation_prompt': gen})
                try:
                    want.append(hf.apply_chat_template(conv, tokenize=False,
                                                       add_generation_prompt=gen))
                except Exception:  # raise_exception: jinja2's TemplateError
                    want.append(None)
        out = subprocess.run([os.path.join(a.bin, 'ds-tokenize'), tok_path, '--jsonl', '--chat',
                              os.path.join(d, 'tokenizer_config.json')],
                             input=''.join(json.dumps(c) + '\n' for c in cases),
                             capture_output=True, text=True, check=True).stdout
        got = [json.loads(x) for x in out.splitlines()]
        got = [None if g.startswith('error: ') else g for g in got]
        equal = sum(g == w for g, w in zip(got, want))
        raised = sum(w is None for w in want)
        failed |= equal != len(want)
        print(f'{name}: {equal}/{len(want)} prompts equal to apply_chat_template '
              f'({raised} raising in both)')
        for g, w, c in zip(got, want, cases):
            if g != w:
                print(f'  differs on {c}:\n    ds {g!r}\n    HF {w!r}')
                break
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
