#include <gtest/gtest.h>

#include <map>
#include <string>

#include "vexp/runtime/launcher.hpp"

using vexp::detect_launcher;
using vexp::Launcher;

namespace {
Launcher with(const std::map<std::string, std::string>& vars) {
  return detect_launcher([&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}
}  // namespace

TEST(Launcher, NoneWithoutItsVariables) {
  Launcher l = with({{"HOME", "/root"}});
  EXPECT_FALSE(l.present());
  EXPECT_FALSE(l.several());
}

TEST(Launcher, SlurmStepCountsItsTasksNotTheAllocation) {
  // srun -n 2 inside an allocation of 4 tasks
  Launcher l = with({{"SLURM_NTASKS", "4"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "1"},
                     {"PMIX_RANK", "1"}});
  EXPECT_EQ(l.name, "Slurm (srun)");
  EXPECT_EQ(l.var, "SLURM_STEP_NUM_TASKS");
  EXPECT_EQ(l.tasks, 2);
  EXPECT_EQ(l.rank, 1);
  EXPECT_TRUE(l.mpi);
  EXPECT_TRUE(l.several());
}

TEST(Launcher, SlurmBatchShellIsOneProcess) {
  // what a batch script of `sbatch -n 2` sees: an allocation, no step
  Launcher l = with({{"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "2"}, {"SLURM_NPROCS", "2"}, {"SLURM_PROCID", "0"}});
  EXPECT_FALSE(l.present());
  EXPECT_FALSE(l.several());
}

TEST(Launcher, SingleTaskStep) {
  Launcher l = with({{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_PROCID", "0"}});
  EXPECT_TRUE(l.present());
  EXPECT_FALSE(l.several());
}

TEST(Launcher, OpenMpiWinsOverAnEnclosingSlurmStep) {
  Launcher l = with({{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}, {"OMPI_COMM_WORLD_SIZE", "3"},
                     {"OMPI_COMM_WORLD_RANK", "0"}});
  EXPECT_EQ(l.name, "Open MPI (mpirun)");
  EXPECT_EQ(l.tasks, 3);
  EXPECT_TRUE(l.several());
}

TEST(Launcher, PmiAndPmix) {
  Launcher pmi = with({{"PMI_SIZE", "2"}, {"PMI_RANK", "0"}});
  EXPECT_EQ(pmi.name, "PMI");
  EXPECT_TRUE(pmi.several());
  // PMIx names no size: only a rank above 0 shows that several were started.
  Launcher first = with({{"PMIX_RANK", "0"}});
  EXPECT_EQ(first.name, "PMIx");
  EXPECT_TRUE(first.mpi);
  EXPECT_FALSE(first.several());
  EXPECT_TRUE(with({{"PMIX_RANK", "3"}}).several());
}

TEST(Launcher, WorldSizeIsNoMpiLauncher) {
  Launcher l = with({{"WORLD_SIZE", "2"}, {"RANK", "0"}});
  EXPECT_EQ(l.name, "WORLD_SIZE");
  EXPECT_FALSE(l.mpi);
  EXPECT_TRUE(l.several());
}

TEST(Launcher, MalformedCountsAreUnknown) {
  for (const char* bad : {"", "2x", "-2", " 2", "0x10", "99999999999999999999999", "16777217"}) {
    Launcher l = with({{"OMPI_COMM_WORLD_SIZE", bad}});
    EXPECT_EQ(l.tasks, 0) << bad;
    EXPECT_FALSE(l.several()) << bad;
  }
  EXPECT_EQ(with({{"OMPI_COMM_WORLD_SIZE", "16777216"}}).tasks, 16777216);
}
