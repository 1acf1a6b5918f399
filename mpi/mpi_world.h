// The World of an MPI job (engine/world.h): MPI_COMM_WORLD of a process started by mpirun, srun or
// another MPI launcher (docs/running.md "Data-parallel training over MPI"). Built only when CMake finds
// MPI (Debian libopenmpi-dev); without it every process trains alone.
#pragma once

#include <memory>

#include "engine/world.h"

namespace tribunal {

/// Whether this process was started by an MPI launcher: one of the environment variables Open MPI's
/// mpirun (OMPI_COMM_WORLD_SIZE), PMIx launchers such as Open MPI 5 and `srun --mpi=pmix` (PMIX_RANK)
/// or PMI-1/2 launchers such as MPICH's Hydra and `srun --mpi=pmi2` (PMI_SIZE) set.
bool launched_by_mpi();

/// MPI_COMM_WORLD after MPI_Init when launched_by_mpi(), else a SoloWorld (so a plain run never
/// starts MPI). A failure inside a lockstep region (engine/world.h) ends every rank with RankFailure;
/// beyond that, the MPI world calls MPI_Abort while an exception unwinds it (a rank's error outside any
/// region, which the others could otherwise wait for in a collective) and when a collective fails in
/// the transport, else MPI_Finalize when destroyed.
std::unique_ptr<World> launched_world();

}  // namespace tribunal
