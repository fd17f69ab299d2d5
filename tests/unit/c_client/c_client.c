/* A C client of libnccl.so.2 built the way third-party programs are: against NVIDIA's nccl.h, with
 * -lnccl, and run with LD_LIBRARY_PATH choosing the library. It checks the calls that need no GPU.
 *
 *   c_client [--expect-library PATH]
 *
 * --expect-library: fail unless the libnccl that got loaded is PATH (after resolving links), so the
 * test cannot pass by accident against another NCCL on the system.
 * Prints "FAIL ..." for each failed check and exits non-zero if there was one; "SKIP ..." for
 * checks this build cannot run yet. With NCCL_DEBUG=VERSION the library prints its banner. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

static int failures = 0;

#define CHECK(cond, ...)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      failures++;                                                           \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                \
      printf(__VA_ARGS__);                                                  \
      printf("\n");                                                         \
    }                                                                       \
  } while (0)

/* Where a function really came from. */
static const char* libraryOf(void* symbol) {
  Dl_info info;
  if (symbol == NULL || dladdr(symbol, &info) == 0 || info.dli_fname == NULL) return "";
  return info.dli_fname;
}

static void* addressOf(ncclResult_t (*fn)(int*)) {
  void* p;
  memcpy(&p, &fn, sizeof(p)); /* a function pointer as a data pointer, without a cast warning */
  return p;
}

static void checkLoadedLibrary(const char* expected) {
  const char* loaded = libraryOf(addressOf(ncclGetVersion));
  char loadedReal[PATH_MAX] = "", expectedReal[PATH_MAX] = "";
  printf("library: %s\n", loaded);
  if (expected == NULL) return;
  CHECK(realpath(loaded, loadedReal) != NULL, "cannot resolve the loaded library path '%s'", loaded);
  CHECK(realpath(expected, expectedReal) != NULL, "cannot resolve --expect-library '%s'", expected);
  CHECK(strcmp(loadedReal, expectedReal) == 0, "loaded %s, expected %s (check LD_LIBRARY_PATH)",
        loadedReal, expectedReal);
}

static void checkVersion(void) {
  int version = -1;
  CHECK(ncclGetVersion(&version) == ncclSuccess, "ncclGetVersion failed");
  CHECK(version == 22809, "ncclGetVersion gave %d", version);
  CHECK(version == NCCL_VERSION_CODE, "runtime %d differs from the header's %d", version, NCCL_VERSION_CODE);
  CHECK(ncclGetVersion(NULL) == ncclInvalidArgument, "ncclGetVersion(NULL) must be ncclInvalidArgument");
}

static void checkErrorStrings(void) {
  const char* texts[ncclNumResults];
  int i, j;
  for (i = 0; i < ncclNumResults; i++) {
    texts[i] = ncclGetErrorString((ncclResult_t)i);
    CHECK(texts[i] != NULL && texts[i][0] != '\0', "ncclGetErrorString(%d) is empty", i);
    for (j = 0; texts[i] != NULL && j < i; j++) {
      CHECK(texts[j] == NULL || strcmp(texts[i], texts[j]) != 0, "codes %d and %d share the text '%s'", i, j, texts[i]);
    }
  }
  CHECK(strcmp(ncclGetErrorString(ncclSuccess), "no error") == 0, "text of ncclSuccess");
  CHECK(strstr(ncclGetErrorString(ncclInvalidArgument), "invalid argument") != NULL, "text of ncclInvalidArgument");
  CHECK(strstr(ncclGetErrorString(ncclInvalidUsage), "invalid usage") != NULL, "text of ncclInvalidUsage");
  {
    const int outOfRange[] = {ncclNumResults, 1000, -1};
    for (i = 0; i < 3; i++) {
      const char* t = ncclGetErrorString((ncclResult_t)outOfRange[i]);
      CHECK(t != NULL && t[0] != '\0', "ncclGetErrorString(%d) is empty", outOfRange[i]);
    }
  }
}

/* ncclGetUniqueId through dlsym: a build that does not export it yet must still link this test. */
static void checkUniqueId(void) {
  typedef ncclResult_t (*GetUniqueIdFn)(ncclUniqueId*);
  void* sym = dlsym(RTLD_DEFAULT, "ncclGetUniqueId");
  GetUniqueIdFn getUniqueId;
  ncclUniqueId id;
  size_t i, nonZero = 0;
  if (sym == NULL) {
    printf("SKIP ncclGetUniqueId is not exported by this library yet\n");
    return;
  }
  memcpy(&getUniqueId, &sym, sizeof(sym));
  CHECK(getUniqueId(NULL) == ncclInvalidArgument, "ncclGetUniqueId(NULL) must be ncclInvalidArgument");
  memset(&id, 0, sizeof(id));
  CHECK(getUniqueId(&id) == ncclSuccess, "ncclGetUniqueId failed: %s", ncclGetLastError(NULL));
  for (i = 0; i < sizeof(id.internal); i++) nonZero += id.internal[i] != 0;
  CHECK(nonZero > 0, "ncclGetUniqueId returned an all-zero id");
}

/* Queries on a NULL communicator are argument errors, whether or not communicators exist yet. */
static void checkNullArguments(void) {
  int value = 12345;
  ncclResult_t async = ncclSuccess;
  const char* last;
  CHECK(ncclCommCount(NULL, &value) == ncclInvalidArgument, "ncclCommCount(NULL comm)");
  CHECK(ncclCommCount(NULL, NULL) == ncclInvalidArgument, "ncclCommCount(NULL, NULL)");
  CHECK(ncclCommCuDevice(NULL, &value) == ncclInvalidArgument, "ncclCommCuDevice(NULL comm)");
  CHECK(ncclCommUserRank(NULL, &value) == ncclInvalidArgument, "ncclCommUserRank(NULL comm)");
  CHECK(value == 12345, "a failed query wrote its output (%d)", value);
  CHECK(ncclCommGetAsyncError(NULL, &async) == ncclInvalidArgument, "ncclCommGetAsyncError(NULL comm)");
  last = ncclGetLastError(NULL);
  CHECK(last != NULL && last[0] != '\0', "ncclGetLastError(NULL) is empty after an argument error");
  if (last != NULL) printf("last error: %s\n", last);
  /* Destroying or aborting nothing is allowed. */
  CHECK(ncclCommDestroy(NULL) == ncclSuccess, "ncclCommDestroy(NULL) must succeed");
  CHECK(ncclCommAbort(NULL) == ncclSuccess, "ncclCommAbort(NULL) must succeed");
}

/* Creating a communicator through a NULL handle pointer must fail, and on the way the library
 * starts up (with NCCL_DEBUG=VERSION it prints its banner; the second ctest looks for it). */
static void checkInitWithNullHandle(void) {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  CHECK(ncclCommInitRank(NULL, 1, id, 0) != ncclSuccess, "ncclCommInitRank(NULL, ...) succeeded");
}

/* Exported names that C clients resolve by dlsym (IREE, XLA's stub) must all be there. */
static void checkDlsymNames(void) {
  static const char* names[] = {"ncclAllReduce", "pncclAllReduce", "ncclCommInitRankConfig", "ncclGroupEnd",
                                "ncclResetDebugInit", "ncclCommWindowRegister", "ncclAlltoAll"};
  size_t i;
  for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    CHECK(dlsym(RTLD_DEFAULT, names[i]) != NULL, "dlsym(%s) found nothing", names[i]);
  }
}

int main(int argc, char** argv) {
  const char* expected = NULL;
  int i;
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--expect-library") == 0 && i + 1 < argc) expected = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--expect-library PATH]\n", argv[0]);
      return 2;
    }
  }
  checkLoadedLibrary(expected);
  checkVersion();
  checkErrorStrings();
  checkUniqueId();
  checkNullArguments();
  checkInitWithNullHandle();
  checkDlsymNames();
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
  fflush(stdout);
  return failures ? 1 : 0;
}
