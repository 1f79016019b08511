"""This process's place in the job, as the launchers (mpirun, srun) tell it."""
import os

# (size, rank) environment variables of the launchers ds runs under, in the order tried.
_LAUNCHERS = (("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),  # OpenMPI's mpirun
              ("PMI_SIZE", "PMI_RANK"),                          # MPICH, srun --mpi=pmi2
              ("SLURM_STEP_NUM_TASKS", "SLURM_PROCID"))          # srun


def world():
    """(ranks, rank) of this job: (1, 0) when no launcher started it."""
    for size, rank in _LAUNCHERS:
        if os.environ.get(size):
            return int(os.environ[size]), int(os.environ.get(rank, "0"))
    return 1, 0
