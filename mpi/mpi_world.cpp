#include "mpi/mpi_world.h"

#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "engine/error.h"

namespace tribunal {
namespace {

// Throws EngineError for a failed MPI call, with MPI's own description.
void check_call(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw EngineError(std::string("MPI ") + what +
                    " failed: " + std::string(text, static_cast<size_t>(length)));
}

// A collective that failed in the transport leaves the ranks out of step (some may have completed it):
// no agreement can follow, so the job ends on every rank, with what failed on this one.
void check_collective(int code, const char* what, int rank, int size) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  std::fprintf(stderr, "tribunal: error: rank %d of %d: MPI %s failed: %.*s; aborting every rank\n", rank,
               size, what, length, text);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return
}

// MPI counts are ints: one collective moves less than 2 GiB per rank.
int count_of(size_t bytes) {
  if (bytes > static_cast<size_t>(INT_MAX))
    throw EngineError("MPI: one exchange of " + std::to_string(bytes) + " bytes per rank exceeds 2^31 − 1");
  return static_cast<int>(bytes);
}

class MpiWorld final : public World {
 public:
  MpiWorld() {
    // One thread at a time calls MPI (a provider trains on a connection's thread, one job at a time;
    // the thread pools' workers never call it).
    int provided = 0;
    check_call(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      throw EngineError("this MPI library does not support MPI_THREAD_SERIALIZED");
    }
    // Errors come back as codes (check_collective() aborts the job with them) instead of aborting silently.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiWorld() override {
    if (std::uncaught_exceptions() > 0 && size_ > 1)
      MPI_Abort(MPI_COMM_WORLD, 1);
    else
      MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

 protected:
  void gather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    if (all.size() != mine.size() * static_cast<size_t>(size_))
      throw EngineError("MPI allgather: wrong buffer size");
    check_collective(MPI_Allgather(mine.data(), count_of(mine.size()), MPI_BYTE, all.data(),
                                   count_of(mine.size()), MPI_BYTE, MPI_COMM_WORLD),
                     "MPI_Allgather", rank_, size_);
  }
  void broadcast_from_root(std::span<std::byte> bytes) override {
    check_collective(MPI_Bcast(bytes.data(), count_of(bytes.size()), MPI_BYTE, 0, MPI_COMM_WORLD),
                     "MPI_Bcast", rank_, size_);
  }

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(name)) return true;
  return false;
}

std::unique_ptr<World> launched_world() {
  if (!launched_by_mpi()) return std::make_unique<SoloWorld>();
  return std::make_unique<MpiWorld>();
}

}  // namespace tribunal
