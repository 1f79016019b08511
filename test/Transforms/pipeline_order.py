#!/usr/bin/python3
"""Checks ds-pipeline's per-rank order of forward and backward phases against the schedules'
own definitions, written out here (not from ds's code): reads the ds.schedule attributes of
`ds-opt --ds-pipeline` output on stdin, drops the sends and receives, and compares each rank's
F/B sequence with
- 1F1B (PipeDream-Flush, DeepSpeed's TrainSchedule): rank r runs min(p - r - 1, m) forwards,
  then alternates one forward and one backward, then drains the backwards;
- interleaved (Megatron-LM's forward_backward_pipelining_with_interleaving): virtual
  micro-batch k runs model chunk (k mod p v) div p (backward: v - 1 minus that), the warm-up is
  min((p - r - 1) 2 + (v - 1) p, m v) forwards, and each chunk takes its micro-batches in order
  from its own data iterator (forward and backward each count per chunk).

  ds-opt ... --ds-pipeline=... | pipeline_order.py --stages P --virtual V --micro-batches M
"""
import argparse
import re
import sys


def one_f_one_b(p, m, r):
    warm = min(p - r - 1, m)
    out = [('F', r, i) for i in range(warm)]
    for i in range(m - warm):
        out += [('F', r, warm + i), ('B', r, i)]
    return out + [('B', r, i) for i in range(m - warm, m)]


def interleaved(p, v, m, r):
    total = m * v
    warm = min((p - r - 1) * 2 + (v - 1) * p, total)
    taken = {'F': [0] * v, 'B': [0] * v}  # each chunk's data iterator, per direction

    def phase(kind, k):
        chunk = (k % (p * v)) // p
        if kind == 'B':
            chunk = v - 1 - chunk
        micro = taken[kind][chunk]
        taken[kind][chunk] += 1
        return (kind, chunk * p + r, micro)

    out = [phase('F', k) for k in range(warm)]
    for k in range(total - warm):
        out += [phase('F', warm + k), phase('B', k)]
    return out + [phase('B', k) for k in range(total - warm, total)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--stages', type=int, required=True)
    ap.add_argument('--virtual', type=int, default=1)
    ap.add_argument('--micro-batches', type=int, required=True)
    a = ap.parse_args()
    got = re.findall(r'ds.pipeline_rank = (\d+).*?ds.schedule = "([^"]*)"', sys.stdin.read())
    ok = len(got) == a.stages
    for rank, sched in got:
        r = int(rank)
        phases = [(t[0], int(t[1:].split('.')[0]), int(t.split('.')[1]))
                  for t in sched.split() if t[0] in 'FB']
        want = (interleaved(a.stages, a.virtual, a.micro_batches, r) if a.virtual > 1
                else one_f_one_b(a.stages, a.micro_batches, r))
        same = phases == want
        ok = ok and same
        print('rank %d: %d phases %s' % (r, len(phases), 'as defined' if same else
              'DIFFER: ds %s, defined %s' % (phases, want)))
    print('%d ranks: %s' % (len(got), 'PASS' if ok else 'FAIL'))
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()
