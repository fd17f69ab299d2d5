/* iree_style_test: drives NCCL the way IREE's CUDA HAL does, in plain C, one process per GPU:
 *   ncclGetVersion (IREE's rule: same major as the header, at least the header's minor),
 *   ncclCommInitRankConfig with config.blocking = 1, ncclCommSplit of that communicator,
 *   ncclCommUserRank / ncclCommCount on the split, then ONE ncclGroupStart/ncclGroupEnd holding an
 *   AllGather, an AllReduce, an all-to-all written as a loop of ncclSend/ncclRecv, a Broadcast, a
 *   Reduce, a ReduceScatter and a paired Send/Recv (ring) on the split communicator; every result is
 *   checked on the host; finally ncclCommFinalize + ncclCommDestroy on the split and on the parent.
 * It also reports whether dlopen("libnccl.so") (the name IREE loads) finds the same library.
 *
 * Usage: iree_style_test [-g N]   (N ranks = GPUs 0..N-1; default: all visible GPUs)
 * Prints "PASS rank r" / "FAIL rank r: ..." per rank and a final line; exit status 0 only if all pass. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

/* Weak so that the program links against a library build without it; any real libnccl has it. */
#pragma weak ncclGetUniqueId

#define COUNT 1027 /* odd on purpose */
#define TIMEOUT_SEC 180

static int g_rank = -1;

static void onAlarm(int sig) {
  (void)sig;
  static const char msg[] = "FAIL iree_style_test: TIMEOUT, a call did not return within the time limit\n";
  ssize_t w = write(1, msg, sizeof(msg) - 1);
  (void)w;
  _exit(3);
}

#define FAILF(...)                           \
  do {                                       \
    printf("FAIL rank %d: ", g_rank);        \
    printf(__VA_ARGS__);                     \
    printf("\n");                            \
    fflush(stdout);                          \
    return 1;                                \
  } while (0)

#define NCCL_OK(call)                                                                                   \
  do {                                                                                                  \
    ncclResult_t r_ = (call);                                                                           \
    if (r_ != ncclSuccess) FAILF("%s returned %d (%s): %s", #call, (int)r_, ncclGetErrorString(r_),    \
                                 ncclGetLastError(NULL));                                              \
  } while (0)

#define CUDA_OK(call)                                                                           \
  do {                                                                                          \
    cudaError_t e_ = (call);                                                                    \
    if (e_ != cudaSuccess) FAILF("%s: %s", #call, cudaGetErrorString(e_));                      \
  } while (0)

static int readFull(int fd, void* p, size_t n) {
  char* c = (char*)p;
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    c += r;
    n -= (size_t)r;
  }
  return 1;
}

static int writeFull(int fd, const void* p, size_t n) {
  const char* c = (const char*)p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return 0;
    c += w;
    n -= (size_t)w;
  }
  return 1;
}

/* Device buffers of one operation and their host copies. */
typedef struct {
  void* dSend;
  void* dRecv;
  void* hSend;
  void* hRecv;
  size_t sendBytes;
  size_t recvBytes;
} Bufs;

static int makeBufs(Bufs* b, size_t sendBytes, size_t recvBytes) {
  memset(b, 0, sizeof(*b));
  b->sendBytes = sendBytes;
  b->recvBytes = recvBytes;
  b->hSend = calloc(1, sendBytes);
  b->hRecv = calloc(1, recvBytes);
  if (!b->hSend || !b->hRecv) return 0;
  if (cudaMalloc(&b->dSend, sendBytes) != cudaSuccess) return 0;
  if (cudaMalloc(&b->dRecv, recvBytes) != cudaSuccess) return 0;
  if (cudaMemset(b->dRecv, 0xAB, recvBytes) != cudaSuccess) return 0; /* poison */
  return 1;
}

static int upload(Bufs* b) { return cudaMemcpy(b->dSend, b->hSend, b->sendBytes, cudaMemcpyHostToDevice) == cudaSuccess; }
static int download(Bufs* b) { return cudaMemcpy(b->hRecv, b->dRecv, b->recvBytes, cudaMemcpyDeviceToHost) == cudaSuccess; }
static void freeBufs(Bufs* b) {
  cudaFree(b->dSend);
  cudaFree(b->dRecv);
  free(b->hSend);
  free(b->hRecv);
}

static void reportDlopen(void) {
  void* h = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    printf("note rank %d: dlopen(\"libnccl.so\") failed (%s); IREE loads NCCL by that name\n", g_rank, dlerror());
    return;
  }
  void* sym = dlsym(h, "ncclGetVersion");
  printf("note rank %d: dlopen(\"libnccl.so\") %s\n", g_rank,
         sym == (void*)&ncclGetVersion ? "finds the same library this program is linked with"
                                      : "finds a DIFFERENT library than the linked libnccl.so.2");
}

static int runRank(int rank, int n, int idReadFd, const int* idWriteFds) {
  g_rank = rank;
  signal(SIGALRM, onAlarm);
  alarm(TIMEOUT_SEC);

  int version = 0;
  NCCL_OK(ncclGetVersion(&version));
  if (version / 10000 != NCCL_MAJOR || version < NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, 0)) {
    FAILF("ncclGetVersion gave %d; this header is %d (IREE needs the same major and at least the minor)", version,
          NCCL_VERSION_CODE);
  }
  reportDlopen();

  ncclUniqueId id;
  if (rank == 0) {
    if (&ncclGetUniqueId == NULL) FAILF("the library does not export ncclGetUniqueId");
    NCCL_OK(ncclGetUniqueId(&id));
    for (int r = 1; r < n; ++r) {
      if (!writeFull(idWriteFds[r], &id, sizeof(id))) FAILF("could not hand the unique id to rank %d", r);
    }
  } else if (!readFull(idReadFd, &id, sizeof(id))) {
    FAILF("did not receive the unique id");
  }

  CUDA_OK(cudaSetDevice(rank));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  ncclComm_t parent = NULL, comm = NULL;
  NCCL_OK(ncclCommInitRankConfig(&parent, n, id, rank, &config));
  /* Same membership, ordered by key = rank: the split keeps the ranks. */
  NCCL_OK(ncclCommSplit(parent, 0, rank, &comm, &config));
  int myRank = -1, count = -1;
  NCCL_OK(ncclCommUserRank(comm, &myRank));
  NCCL_OK(ncclCommCount(comm, &count));
  if (myRank != rank || count != n) FAILF("split communicator: rank %d count %d, expected %d and %d", myRank, count, rank, n);

  const size_t c = COUNT;
  Bufs ag, ar, a2a, bc, rd, rs, sr;
  if (!makeBufs(&ag, c * 4, n * c * 4) || !makeBufs(&ar, c * 4, c * 4) || !makeBufs(&a2a, n * c * 4, n * c * 4) ||
      !makeBufs(&bc, c * 4, c * 4) || !makeBufs(&rd, c * 4, c * 4) || !makeBufs(&rs, n * c * 4, c * 4) ||
      !makeBufs(&sr, c * 4, c * 4)) {
    FAILF("allocating buffers failed");
  }
  const int root = n - 1;
  for (size_t i = 0; i < c; ++i) {
    ((float*)ag.hSend)[i] = (float)(rank * 1000 + (int)i);
    ((int32_t*)ar.hSend)[i] = rank + 1 + (int32_t)(i % 7);
    ((float*)bc.hSend)[i] = rank == root ? 7.0f + 0.5f * (float)i : -1.0f;
    ((int32_t*)rd.hSend)[i] = (rank * 37 + (int32_t)i) % 101;
    ((int32_t*)sr.hSend)[i] = rank * 10 + (int32_t)(i % 10);
  }
  for (int p = 0; p < n; ++p) {
    for (size_t i = 0; i < c; ++i) {
      ((int32_t*)a2a.hSend)[p * c + i] = rank * 100000 + p * 1000 + (int32_t)i;
      ((float*)rs.hSend)[p * c + i] = (float)((rank + 1) * (int)((p * c + i) % 13));
    }
  }
  if (!upload(&ag) || !upload(&ar) || !upload(&a2a) || !upload(&bc) || !upload(&rd) || !upload(&rs) || !upload(&sr)) {
    FAILF("uploading inputs failed");
  }

  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllGather(ag.dSend, ag.dRecv, c, ncclFloat, comm, stream));
  NCCL_OK(ncclAllReduce(ar.dSend, ar.dRecv, c, ncclInt32, ncclSum, comm, stream));
  for (int p = 0; p < n; ++p) {
    NCCL_OK(ncclSend((char*)a2a.dSend + p * c * 4, c, ncclInt32, p, comm, stream));
    NCCL_OK(ncclRecv((char*)a2a.dRecv + p * c * 4, c, ncclInt32, p, comm, stream));
  }
  NCCL_OK(ncclBroadcast(bc.dSend, bc.dRecv, c, ncclFloat, root, comm, stream));
  NCCL_OK(ncclReduce(rd.dSend, rd.dRecv, c, ncclInt32, ncclMax, 0, comm, stream));
  NCCL_OK(ncclReduceScatter(rs.dSend, rs.dRecv, c, ncclFloat, ncclSum, comm, stream));
  NCCL_OK(ncclSend(sr.dSend, c, ncclInt32, (rank + 1) % n, comm, stream));
  NCCL_OK(ncclRecv(sr.dRecv, c, ncclInt32, (rank - 1 + n) % n, comm, stream));
  NCCL_OK(ncclGroupEnd());
  CUDA_OK(cudaStreamSynchronize(stream));

  if (!download(&ag) || !download(&ar) || !download(&a2a) || !download(&bc) || !download(&rd) || !download(&rs) ||
      !download(&sr)) {
    FAILF("downloading results failed");
  }
  for (int j = 0; j < n; ++j) {
    for (size_t i = 0; i < c; ++i) {
      const float want = (float)(j * 1000 + (int)i), got = ((float*)ag.hRecv)[j * c + i];
      if (got != want) FAILF("AllGather [%zu]: expected %g got %g", j * c + i, want, got);
      const int32_t w2 = j * 100000 + rank * 1000 + (int32_t)i, g2 = ((int32_t*)a2a.hRecv)[j * c + i];
      if (g2 != w2) FAILF("all-to-all (send/recv loop) [%zu]: expected %d got %d", j * c + i, w2, g2);
    }
  }
  for (size_t i = 0; i < c; ++i) {
    const int32_t wantAr = n * (n + 1) / 2 + n * (int32_t)(i % 7);
    if (((int32_t*)ar.hRecv)[i] != wantAr) FAILF("AllReduce [%zu]: expected %d got %d", i, wantAr, ((int32_t*)ar.hRecv)[i]);
    const float wantBc = 7.0f + 0.5f * (float)i;
    if (((float*)bc.hRecv)[i] != wantBc) FAILF("Broadcast [%zu]: expected %g got %g", i, wantBc, ((float*)bc.hRecv)[i]);
    if (rank == 0) {
      int32_t m = 0;
      for (int j = 0; j < n; ++j) {
        const int32_t v = (j * 37 + (int32_t)i) % 101;
        m = j == 0 || v > m ? v : m;
      }
      if (((int32_t*)rd.hRecv)[i] != m) FAILF("Reduce(max) at root [%zu]: expected %d got %d", i, m, ((int32_t*)rd.hRecv)[i]);
    }
    const float wantRs = (float)(n * (n + 1) / 2 * (int)((rank * c + i) % 13));
    if (((float*)rs.hRecv)[i] != wantRs) FAILF("ReduceScatter [%zu]: expected %g got %g", i, wantRs, ((float*)rs.hRecv)[i]);
    const int from = (rank - 1 + n) % n;
    const int32_t wantSr = from * 10 + (int32_t)(i % 10);
    if (((int32_t*)sr.hRecv)[i] != wantSr) FAILF("Send/Recv from rank %d [%zu]: expected %d got %d", from, i, wantSr, ((int32_t*)sr.hRecv)[i]);
  }

  NCCL_OK(ncclCommFinalize(comm));
  NCCL_OK(ncclCommDestroy(comm));
  NCCL_OK(ncclCommFinalize(parent));
  NCCL_OK(ncclCommDestroy(parent));
  freeBufs(&ag);
  freeBufs(&ar);
  freeBufs(&a2a);
  freeBufs(&bc);
  freeBufs(&rd);
  freeBufs(&rs);
  freeBufs(&sr);
  cudaStreamDestroy(stream);
  printf("PASS rank %d: version %d, init(blocking) + split + 7 operations in one group checked, finalize + destroy\n",
         rank, version);
  fflush(stdout);
  return 0;
}

/* Device count from a child, so that this process stays free of CUDA before forking the ranks. */
static int probeDeviceCount(void) {
  int p[2];
  if (pipe(p) != 0) return 0;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    ssize_t w = write(p[1], &count, sizeof(count));
    (void)w;
    _exit(0);
  }
  close(p[1]);
  int count = 0;
  if (!readFull(p[0], &count, sizeof(count))) count = 0;
  close(p[0]);
  waitpid(pid, NULL, 0);
  return count;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int n = -1;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "-g") == 0 && i + 1 < argc) n = atoi(argv[++i]);
    else {
      printf("usage: iree_style_test [-g N]\n");
      return 2;
    }
  }
  const int devices = probeDeviceCount();
  if (n <= 0) n = devices;
  if (n <= 0 || n > devices || n > 64) {
    printf("FAIL iree_style_test: %d ranks requested, %d GPUs visible\n", n, devices);
    return 2;
  }
  int idPipes[64][2];
  int writeFds[64];
  for (int r = 1; r < n; ++r) {
    if (pipe(idPipes[r]) != 0) return 2;
    writeFds[r] = idPipes[r][1];
  }
  pid_t pids[64];
  fflush(stdout);
  for (int r = 0; r < n; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) {
      for (int q = 1; q < n; ++q) {
        if (q != r) close(idPipes[q][0]);
        if (r != 0) close(idPipes[q][1]);
      }
      _exit(runRank(r, n, r == 0 ? -1 : idPipes[r][0], writeFds));
    }
  }
  for (int r = 1; r < n; ++r) {
    close(idPipes[r][0]);
    close(idPipes[r][1]);
  }
  int failed = 0;
  for (int r = 0; r < n; ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      ++failed;
      if (!WIFEXITED(st)) printf("FAIL rank %d: killed by signal %d\n", r, WTERMSIG(st));
      /* A failed rank leaves its peers waiting; their alarm ends them. */
    }
  }
  printf("iree_style_test: %s (%d ranks, %d failed)\n", failed ? "FAIL" : "PASS", n, failed);
  return failed ? 1 : 0;
}
