"""Token data a language model can learn, as .npy inputs idx and targets: SAMPLES windows of a
Markov chain (each token followed by (5 t + 3) mod V with probability 0.8, else one of the next
two) and the same windows shifted by one.
usage: make_tokens.py DIR STEPS BATCH SEQ VOCAB"""
import sys

import numpy as np

out, steps, batch, seq, vocab = sys.argv[1], *map(int, sys.argv[2:6])
rng = np.random.RandomState(0)
n = steps * batch * seq + 1
stream = np.empty(n, dtype=np.int64)
stream[0] = rng.randint(vocab)
jump = rng.choice(3, size=n, p=[0.8, 0.15, 0.05])
for i in range(1, n):
    stream[i] = (5 * stream[i - 1] + 3 + jump[i]) % vocab
samples = steps * batch
np.save(out + '/idx.npy', np.stack([stream[j * seq:j * seq + seq] for j in range(samples)]))
np.save(out + '/targets.npy', np.stack([stream[j * seq + 1:j * seq + seq + 1] for j in range(samples)]))
