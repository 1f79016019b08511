#!/usr/bin/python3
"""Slurm as the launcher: a single-node Slurm (munged, slurmctld and slurmd as local daemons of
this test, with a generated key and slurm.conf in a temporary directory, all stopped and
removed at the end) runs `srun -n 4 ds-run STEP` of a ZeRO-3 GPT training step, and its
per-step losses are the very same as those of `mpirun -np 4 ds-run STEP`: rank, world size and
each rank's share of the data come from MPI (PMIx) whichever launcher starts the ranks. Then
`srun -n 2 .venv/bin/python test/python/engine_check.py` trains with ds.initialize under Slurm
and must match its plain PyTorch loop.

Exits 77 (ctest's skip code), printing "SKIP: why", where Slurm is not installed
(scripts/setup.sh installs it) or its daemons cannot run here.

usage: slurm_launch.py --bin BUILD/bin --work DIR [--steps 5] [--mpi pmix]
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, '..', 'models')
CHECK = os.path.join(HERE, '..', 'python', 'engine_check.py')
MPIRUN = ['mpirun', '--allow-run-as-root', '--oversubscribe']
SKIP = 77


def skip(why):
    # Under CI (CI=true) a skip is a failure: the machine lacks what the test needs.
    if os.environ.get('CI') == 'true':
        print('FAIL (CI=true, where nothing may skip): ' + why)
        sys.stdout.flush()
        sys.exit(1)
    print('SKIP: ' + why)
    sys.stdout.flush()
    sys.exit(SKIP)


def run(cmd, log, env=None, timeout=None):
    with open(log, 'w') as f:
        try:
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout)
            code = r.returncode
        except subprocess.TimeoutExpired:
            code = 'timeout after %ds' % timeout
    if code != 0:
        sys.stderr.write(open(log).read())
        sys.exit('FAILED (exit %s): %s' % (code, ' '.join(cmd)))


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tail(path, n=10):
    try:
        lines = open(path, errors='replace').read().splitlines()
    except OSError:
        return '  (%s: none)' % os.path.basename(path)
    return '\n'.join(['  == %s ==' % os.path.basename(path)] + ['  ' + l for l in lines[-n:]])


class Slurm:
    """munged, slurmctld and slurmd of this test, in `d`; stop() ends them (always called)."""

    def __init__(self, d, mpi):
        self.d = d
        self.procs = []
        self.host = socket.gethostname().split('.')[0]
        self.munge_socket = os.path.join(d, 'munge', 'munge.socket')
        self.conf = os.path.join(d, 'slurm.conf')
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        # Without these the client commands would look for /etc/slurm or DNS SRV records.
        for k in list(self.env):
            if k.startswith(('SLURM_', 'SBATCH_', 'SALLOC_', 'SRUN_')) and k != 'SLURM_CONF':
                del self.env[k]
        self.mpi = mpi

    def write(self):
        d = self.d
        os.makedirs(os.path.join(d, 'munge'), mode=0o700)
        os.makedirs(os.path.join(d, 'state'), mode=0o700)
        os.makedirs(os.path.join(d, 'spool'), mode=0o700)
        os.makedirs(os.path.join(d, 'tmp'), mode=0o700)
        key = os.path.join(d, 'munge', 'munge.key')
        with open(key, 'wb') as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        conf = {
            'ClusterName': 'dstest',
            'SlurmctldHost': self.host,
            'SlurmctldPort': free_port(),
            'SlurmdPort': free_port(),
            'SlurmUser': 'root',
            'SlurmdUser': 'root',
            'AuthType': 'auth/munge',
            'CredType': 'cred/munge',
            'AuthInfo': 'socket=' + self.munge_socket,
            'StateSaveLocation': os.path.join(d, 'state'),
            'SlurmdSpoolDir': os.path.join(d, 'spool'),
            'SlurmctldPidFile': os.path.join(d, 'slurmctld.pid'),
            'SlurmdPidFile': os.path.join(d, 'slurmd.pid'),
            'SlurmctldLogFile': os.path.join(d, 'slurmctld.log'),
            'SlurmdLogFile': os.path.join(d, 'slurmd.log'),
            'SlurmctldDebug': 'info',
            'SlurmdDebug': 'info',
            'ProctrackType': 'proctrack/linuxproc',
            'TaskPlugin': 'task/none',
            'JobAcctGatherType': 'jobacct_gather/none',
            'AccountingStorageType': 'accounting_storage/none',
            'SwitchType': 'switch/none',
            'MpiDefault': self.mpi,
            # Another cluster of this test running at the same time (ctest -j) has its own PMIx
            # directories and job ids: Slurm names the PMIx client directory by job and step
            # under TmpFS.
            'TmpFS': os.path.join(d, 'tmp'),
            'FirstJobId': random.randint(1000, 1000000),
            'SelectType': 'select/cons_tres',
            'SelectTypeParameters': 'CR_CPU',
            # The node claims 4 CPUs whatever the machine has (4 ranks on a 2-core CI machine).
            'SlurmdParameters': 'config_overrides',
            'ReturnToService': '2',
            'ReconfigFlags': 'KeepPartState',
            'SlurmctldTimeout': '30',
            'SlurmdTimeout': '30',
            'InactiveLimit': '0',
            'MinJobAge': '10',
            'KillWait': '5',
            'Waittime': '0',
        }
        lines = ['%s=%s' % kv for kv in conf.items()]
        lines.append('NodeName=%s NodeAddr=127.0.0.1 CPUs=4 Boards=1 SocketsPerBoard=1 '
                     'CoresPerSocket=4 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN'
                     % self.host)
        lines.append('PartitionName=debug Nodes=%s Default=YES MaxTime=INFINITE State=UP '
                     'OverSubscribe=YES' % self.host)
        with open(self.conf, 'w') as f:
            f.write('\n'.join(lines) + '\n')

    def spawn(self, name, cmd):
        out = open(os.path.join(self.d, name + '.out'), 'w')
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                             start_new_session=True)
        self.procs.append((name, p))
        return p

    def start(self, timeout):
        d = self.d
        m = os.path.join(d, 'munge')
        self.spawn('munged', ['munged', '--foreground', '--force',
                              '--socket=' + self.munge_socket,
                              '--key-file=' + os.path.join(m, 'munge.key'),
                              '--pid-file=' + os.path.join(m, 'munged.pid'),
                              '--seed-file=' + os.path.join(m, 'munged.seed'),
                              '--log-file=' + os.path.join(d, 'munged.log')])
        deadline = time.time() + timeout
        while not os.path.exists(self.munge_socket):
            self.check_alive()
            if time.time() > deadline:
                self.give_up('munged did not open its socket in %ds' % timeout)
            time.sleep(0.1)
        self.spawn('slurmctld', ['slurmctld', '-D', '-i', '-f', self.conf])
        self.spawn('slurmd', ['slurmd', '-D', '-N', self.host, '-f', self.conf])
        last = ''
        while time.time() < deadline:
            self.check_alive()
            r = subprocess.run(['sinfo', '-h', '-N', '-o', '%T'], env=self.env,
                               capture_output=True, text=True, timeout=10)
            last = (r.stdout + r.stderr).strip()
            if r.returncode == 0 and last == 'idle':
                return
            time.sleep(0.5)
        self.give_up('the Slurm node is not idle after %ds (sinfo: %s)' % (timeout, last or '-'))

    def check_alive(self):
        for name, p in self.procs:
            if p.poll() is not None:
                self.give_up('%s exited with %d at start' % (name, p.returncode))

    def give_up(self, why):
        print('SKIP: the Slurm daemons cannot run here: ' + why)
        for name in ('munged', 'slurmctld', 'slurmd'):
            log = os.path.join(self.d, name + '.log')
            out = os.path.join(self.d, name + '.out')
            print(tail(log if os.path.exists(log) and os.path.getsize(log) else out))
        sys.stdout.flush()
        raise SystemExit(SKIP)

    def task_env(self):
        """What srun gives each task of the launcher's environment, one line per task."""
        r = subprocess.run(['srun', '-n', '4', '--mpi=' + self.mpi, '--time=1', '/bin/sh', '-c',
                            'echo SLURM_PROCID=$SLURM_PROCID SLURM_STEP_NUM_TASKS='
                            '$SLURM_STEP_NUM_TASKS PMIX_RANK=$PMIX_RANK'],
                           env=self.env, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            return ['(srun: %s)' % r.stderr.strip()]
        return sorted(r.stdout.split('\n'))  # in rank order

    def stop(self):
        # Our jobs first (a srun that timed out leaves its tasks to slurmd), then the daemons.
        if self.procs and self.procs[-1][1].poll() is None:
            subprocess.run(['scancel', '--full', '--name=ds-slurm-launch'], env=self.env,
                           capture_output=True, timeout=30)
            deadline = time.time() + 10
            while time.time() < deadline:
                r = subprocess.run(['squeue', '-h'], env=self.env, capture_output=True,
                                   text=True, timeout=30)
                if r.returncode != 0 or not r.stdout.strip():
                    break
                time.sleep(0.5)
        for name, p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for name, p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        # slurmstepd daemonizes away from slurmd: any left of this cluster (they carry its
        # SLURM_CONF in their environment) are ended by their ids.
        mark = ('SLURM_CONF=' + self.conf).encode() + b'\0'
        for pid in os.listdir('/proc'):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                environ = open('/proc/%s/environ' % pid, 'rb').read() + b'\0'
            except OSError:
                continue
            if b'\0' + mark in b'\0' + environ:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass


def losses(path):
    if not os.path.exists(path):
        return []
    return [(r['step'], r['loss']) for r in (json.loads(l) for l in open(path))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bin', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--steps', type=int, default=5)
    ap.add_argument('--mpi', default='pmix', help="Slurm's MPI plugin (srun --mpi)")
    ap.add_argument('--timeout', type=int, default=30,
                    help='seconds the daemons have to bring the node up')
    args = ap.parse_args()

    if not shutil.which('mpirun'):
        skip('mpirun not found (openmpi-bin): nothing to compare srun with')
    missing = [t for t in ('srun', 'sinfo', 'slurmctld', 'slurmd', 'munged')
               if not shutil.which(t)]
    if missing:
        skip('%s not found (bash scripts/setup.sh installs slurm-wlm and '
             'munge)' % ', '.join(missing))
    if os.geteuid() != 0:
        # slurmd starts the tasks and must be able to become the submitting user.
        skip('the local slurmd of this test runs as root, and this test is not root')

    os.makedirs(args.work, exist_ok=True)
    w = lambda f: os.path.join(args.work, f)
    b = lambda t: os.path.join(args.bin, t)
    for f in ('mpi.jsonl', 'slurm.jsonl'):
        if os.path.exists(w(f)):
            os.remove(w(f))
    started = time.time()

    # Slurm's state lives in a private directory (short: the munge socket is in it).
    d = tempfile.mkdtemp(prefix='ds-slurm-',
                         dir='/tmp' if len(tempfile.gettempdir()) > 40 else None)
    slurm = Slurm(d, args.mpi)
    try:
        slurm.write()
        plugins = subprocess.run(['srun', '--mpi=list'], env=slurm.env, capture_output=True,
                                 text=True, timeout=30)
        if args.mpi not in (plugins.stdout + plugins.stderr).split():
            skip("Slurm has no MPI plugin %s (srun --mpi=list: %s)" %
                 (args.mpi, ' '.join((plugins.stdout + plugins.stderr).split())))
        slurm.start(args.timeout)
        version = subprocess.run(['srun', '--version'], capture_output=True, text=True,
                                 env=slurm.env).stdout.split()[-1]
        print('Slurm %s: node %s (4 CPUs) idle after %.1fs' % (version, slurm.host,
                                                               time.time() - started))

        # The ZeRO-3 training step of the test GPT: 4 ranks x micro-batch 4 x 2 accumulation
        # steps.
        mb, seq, vocab, G = 4, 16, 64, 32
        cfg = {'train_batch_size': G, 'train_micro_batch_size_per_gpu': mb,
               'gradient_accumulation_steps': 2,
               'optimizer': {'type': 'AdamW', 'params': {'lr': 1e-3}},
               'zero_optimization': {'stage': 3, 'stage3_param_persistence_threshold': 0}}
        json.dump(cfg, open(w('cfg.json'), 'w'))
        step = w('step.mlir')
        run([b('ds-opt'), os.path.join(MODELS, 'gpt_script.pt'),
             '--input', 'idx=tensor<%dx%dxi64>' % (mb, seq),
             '--input', 'targets=tensor<%dx%dxi64>' % (mb, seq),
             '--config', w('cfg.json'), '-o', step], w('ds-opt.log'))
        rng = np.random.RandomState(0)
        idx = rng.randint(0, vocab, size=(args.steps * G, seq)).astype(np.int64)
        np.save(w('idx.npy'), idx)
        np.save(w('targets.npy'), np.roll(idx, -1, axis=1))
        train = [b('ds-run'), step, '--data', 'idx=' + w('idx.npy'),
                 '--data', 'targets=' + w('targets.npy'), '--steps', str(args.steps),
                 '--threads', '1']

        # mpirun outside any Slurm allocation this test may itself run in: it starts the
        # ranks here.
        local = {k: v for k, v in os.environ.items() if not k.startswith('SLURM_')}
        t = time.time()
        run(MPIRUN + ['-np', '4'] + train + ['--log', w('mpi.jsonl')], w('mpi.log'), env=local,
            timeout=60)
        print('mpirun -np 4 ds-run: %.1fs' % (time.time() - t))
        t = time.time()
        run(['srun', '-n', '4', '--mpi=' + args.mpi, '--kill-on-bad-exit=1', '--time=5',
             '--job-name=ds-slurm-launch'] + train + ['--log', w('slurm.jsonl')],
            w('slurm.log'), env=slurm.env, timeout=60)
        print('srun -n 4 --mpi=%s ds-run: %.1fs' % (args.mpi, time.time() - t))
        # ds from Python under srun: the engine reads its rank count from Slurm's variables
        # and matches a plain PyTorch loop (engine_check.py prints PASS on rank 0).
        venv_python = os.path.join(HERE, '..', '..', '.venv', 'bin', 'python')
        python_ok = None
        if os.path.exists(venv_python):
            t = time.time()
            run(['srun', '-n', '2', '--mpi=' + args.mpi, '--kill-on-bad-exit=1', '--time=5',
                 '--job-name=ds-slurm-python', venv_python, CHECK, 'gpt', '--zero', '1',
                 '--steps', '6'], w('python.log'),
                env=dict(slurm.env, PYTHONPATH=os.path.join(args.bin, '..', 'python')),
                timeout=180)
            python_ok = 'PASS gpt train_batch ranks=2' in open(w('python.log')).read()
            print('srun -n 2 python engine_check.py (ds.initialize, ZeRO-1): %s (%.1fs)' %
                  ('PASS' if python_ok else 'FAIL', time.time() - t))
        print('srun -n 4 gives its tasks:')
        for line in slurm.task_env():
            if line:
                print('  ' + line)
    finally:
        slurm.stop()
        shutil.rmtree(d, ignore_errors=True)

    a, s = losses(w('mpi.jsonl')), losses(w('slurm.jsonl'))
    if not s:
        # srun can return 0 when the step's launch failed.
        sys.stderr.write(open(w('slurm.log')).read())
        print('srun -n 4 left no log of training')
        print('-> FAIL')
        return 1
    first = json.loads(open(w('slurm.jsonl')).readline())
    ranks = [r['rank'] for r in first.get('ranks', [])]
    shard = [r['parameter_bytes'] for r in first.get('ranks', [])]
    print('step  mpirun -np 4  srun -n 4')
    for (i, x), (_, y) in zip(a, s):
        print('%4d  %-12r  %-12r %s' % (i, x, y, 'same' if x == y else 'DIFFERENT'))
    ok = len(a) == len(s) == args.steps and a == s and ranks == [0, 1, 2, 3]
    if python_ok is False:
        sys.stderr.write(open(w('python.log')).read()[-3000:])
        ok = False
    print('srun\'s ranks in the log: %s, parameter bytes each (ZeRO-3 shards): %s' %
          (ranks, shard))
    print('%d steps, %d and %d losses, identical: %s (%.1fs in all)' %
          (args.steps, len(a), len(s), a == s, time.time() - started))
    print('-> PASS' if ok else '-> FAIL')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
