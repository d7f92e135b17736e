/* OpenMPI peer for bench/drivers/allreduce_vs_peers.sh: MPI_Allreduce of floats,
 * timing like shardline-allreduce-worker (median of the slowest rank). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const char* sizes = argc > 1 ? argv[1] : "65536,1048576,16777216,67108864";
  int iters = argc > 2 ? atoi(argv[2]) : 20;
  char* list = strdup(sizes);
  for (char* tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    long bytes = atol(tok);
    long n = bytes / 4;
    float* in = malloc(n * sizeof(float));
    float* out = malloc(n * sizeof(float));
    double* times = malloc(iters * sizeof(double));
    for (long i = 0; i < n; ++i) in[i] = 1.0f;
    for (int it = 0; it < iters + 3; ++it) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double dt = MPI_Wtime() - t0, slowest;
      MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (it >= 3) times[it - 3] = slowest;
    }
    if (rank == 0) {
      qsort(times, iters, sizeof(double), cmp);
      double med = times[iters / 2], algbw = bytes / med / 1e9;
      printf("{\"impl\":\"openmpi_tcp\",\"op\":\"allreduce\",\"world\":%d,\"bytes\":%ld,\"iters\":%d,"
             "\"median_s\":%.9g,\"algbw_GBps\":%.6g,\"busbw_GBps\":%.6g}\n",
             world, bytes, iters, med, algbw, algbw * 2.0 * (world - 1) / world);
      fflush(stdout);
    }
    free(in); free(out); free(times);
  }
  free(list);
  MPI_Finalize();
  return 0;
}
