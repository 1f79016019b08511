"""Runs a DeepSpeed worker script as RANKS processes on the CPU (torch.distributed's env://
rendezvous, gloo) from the project's .venv, for the benchmarks that set DeepSpeed beside ds.
Each worker writes OUT.RANK.json with its step times ("ms") and peak RSS ("rss").
run_ds_commands runs ds's side of such a benchmark."""
import json
import os
import statistics
import subprocess

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
DEEPSPEED = 'deepspeed==0.19.*'
# Steps left out of every median: PyTorch eager, DDP and DeepSpeed settle only from their third
# step (their allocators' caches, oneDNN's primitive cache; bench/train_gpt.py), ds-run from its
# second.
WARM = 3


def run_ds_commands(cmds):
    """Runs ds's commands (ds-opt, then mpirun ds-run) in order: None, or why one failed (the
    tool and the last line it wrote to stderr), for a benchmark row that prints it."""
    for cmd in cmds:
        try:
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        except OSError as e:
            return 'failed: %s' % e
        if r.returncode:
            last = [l for l in r.stderr.splitlines() if l.strip()]
            return 'failed: %s: %s' % (os.path.basename(cmd[0]) if cmd[0] != 'mpirun' else
                                       'mpirun ds-run', last[-1][:160] if last else
                                       'exit %d' % r.returncode)
    return None


def run_workers(script, path, args, out, ranks, port, steps, needs='deepspeed', warm=WARM):
    """(median step ms over the steps after the first `warm`, the largest RSS) or the reason it
    did not run. needs: the module the workers import that .venv must have (a plain PyTorch
    worker: 'torch')."""
    py = os.path.join(ROOT, '.venv', 'bin', 'python')
    if not os.path.exists(py):
        return 'no .venv (run scripts/setup.sh)'
    probe = subprocess.run([py, '-c', 'import ' + needs], capture_output=True, text=True)
    if probe.returncode != 0 and needs == 'deepspeed':
        # The benchmarks' own dependency (not the tests'): installed here on first use.
        subprocess.run([py, '-m', 'pip', 'install', '-q', DEEPSPEED], capture_output=True)
        probe = subprocess.run([py, '-c', 'import ' + needs], capture_output=True, text=True)
    if probe.returncode != 0:
        return '%s is not installed in .venv (.venv/bin/pip install %s)' % (
            needs, DEEPSPEED if needs == 'deepspeed' else needs)
    open(path, 'w').write(script)
    for r in range(ranks):
        if os.path.exists('%s.%d.json' % (out, r)):
            os.remove('%s.%d.json' % (out, r))
    procs = []
    for r in range(ranks):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(ranks),
                   LOCAL_WORLD_SIZE=str(ranks), MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port),
                   DS_ACCELERATOR='cpu', OMP_NUM_THREADS='1')
        procs.append(subprocess.Popen([py, path] + args, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    logs = [p.communicate(timeout=1800)[0] for p in procs]
    for r, log in enumerate(logs):
        open('%s.rank%d.log' % (out, r), 'w').write(log)
    failed = [r for r, p in enumerate(procs) if p.returncode]
    wrote = all(os.path.exists('%s.%d.json' % (out, r)) for r in range(ranks))
    if failed and wrote:
        # Every rank wrote its results and then one died on the way out (seen with DeepSpeed
        # ZeRO-3 on gloo: 'terminate called without an active exception' at exit): the steps
        # count, and the table says so.
        print('  (note: rank %d exited with %d after writing its results; log: %s.rank%d.log)'
              % (failed[0], procs[failed[0]].returncode, out, failed[0]))
    elif failed:
        # The first failing rank's last words (rank 0 may have ended well, killed by the others).
        r = failed[0]
        last = [l for l in logs[r].splitlines() if l.strip()]
        return 'failed: rank %d (exit %d; its log: %s.rank%d.log): %s' % (
            r, procs[r].returncode, out, r, last[-1][:160] if last else 'no output')
    got = [json.load(open('%s.%d.json' % (out, r))) for r in range(ranks)]
    ms = statistics.median(max(g['ms'][s] for g in got) for s in range(warm, steps))
    return ms, max(g['rss'] for g in got)
