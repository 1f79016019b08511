"""ds-launch: start the ranks of a ds training script on this node, as `deepspeed` does.

    ds-launch [--num_gpus N | -np N] [--hostfile F] SCRIPT.py [ARGS...]

runs `mpirun -np N <this python> SCRIPT.py ARGS` (OpenMPI: oversubscribing the cores, as root
where the shell is root). Under Slurm, run `srun -n N .venv/bin/python SCRIPT.py` instead.
"""
import argparse
import os
import shutil
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(prog="ds-launch", description=__doc__.split("\n\n")[1].strip())
    ap.add_argument("-np", "--num_gpus", "--num_procs", dest="n", type=int, default=1,
                    help="ranks to start on this node (default 1)")
    ap.add_argument("--hostfile", help="an MPI hostfile (several nodes)")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if a.n < 1:
        ap.error("-np must be at least 1")
    mpirun = shutil.which("mpirun")
    if not mpirun:
        sys.stderr.write("ds-launch: error: mpirun is not installed (openmpi-bin; "
                         "scripts/setup.sh installs it)\n")
        return 1
    cmd = [mpirun, "-np", str(a.n), "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if a.hostfile:
        cmd += ["--hostfile", a.hostfile]
    cmd += [sys.executable, a.script] + a.args
    os.execv(mpirun, cmd)
    return 1
