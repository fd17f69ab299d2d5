#include "transport/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <utility>

#include "util/unique_fd.h"

namespace weft::transport::shm {
namespace {

constexpr const char* kShmDir = "/dev/shm";
constexpr int kCreateAttempts = 8;  // names already taken (another job's luck) before giving up

bool nameCharOk(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

uint64_t randomWord() {
  uint64_t w = 0;
  if (getrandom(&w, sizeof(w), GRND_NONBLOCK) != (ssize_t)sizeof(w)) {
    w = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&w;
  }
  return w;
}

std::string mib(uint64_t bytes) {
  char text[32];
  snprintf(text, sizeof(text), "%.1f MiB", (double)bytes / (1 << 20));
  return text;
}

Status mapWhole(int fd, size_t bytes, const std::string& name, void** out) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    WEFT_WARN("cannot map shared-memory segment %s%s (%s): %s", kShmDir, name.c_str(), mib(bytes).c_str(),
              strerror(errno));
    return ncclSystemError;
  }
  *out = p;
  return ncclSuccess;
}

}  // namespace

uint64_t shmFreeBytes() {
  struct statvfs s;
  if (statvfs(kShmDir, &s) != 0) return 0;
  return (uint64_t)s.f_bavail * s.f_frsize;
}

Status checkShmDesc(const ShmDesc& d, const char* from) {
  if (d.magic != kShmDescMagic) {
    WEFT_WARN("%s sent a shared-memory descriptor with a bad magic (%08x): not weft's SHM transport, or "
              "corrupted; check that every rank runs the same weft", from, d.magic);
    return ncclRemoteError;
  }
  size_t len = 0;
  while (len < kShmNameBytes && d.name[len] != '\0') len++;
  bool ok = len > 6 && len < kShmNameBytes && strncmp(d.name, "/weft-", 6) == 0;
  for (size_t i = 1; ok && i < len; i++) ok = nameCharOk(d.name[i]);
  if (!ok) {
    WEFT_WARN("%s sent a shared-memory descriptor whose segment name is not one weft makes; refused", from);
    return ncclRemoteError;
  }
  if (d.bytes == 0) {
    WEFT_WARN("%s sent a shared-memory descriptor of size 0; refused", from);
    return ncclRemoteError;
  }
  return ncclSuccess;
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    reset();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    name_ = std::move(other.name_);
    other.name_.clear();
    ownsName_ = std::exchange(other.ownsName_, false);
  }
  return *this;
}

Status ShmSegment::create(const std::string& tag, size_t bytes, ShmSegment* out) {
  WEFT_CHECK_ARG(out != nullptr && bytes > 0, "ShmSegment::create: no output or size 0");
  std::string safeTag;
  for (char c : tag) safeTag += nameCharOk(c) ? c : '-';
  util::UniqueFd fd;
  std::string name;
  for (int attempt = 0; attempt < kCreateAttempts && !fd.valid(); attempt++) {
    char suffix[24];
    snprintf(suffix, sizeof(suffix), "-%016llx", (unsigned long long)randomWord());
    name = "/weft-" + safeTag.substr(0, kShmNameBytes - 1 - 6 - 17) + suffix;
    int f;
    do { f = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600); } while (f < 0 && errno == EINTR);
    if (f >= 0) fd.reset(f);
    else if (errno != EEXIST) break;
  }
  if (!fd.valid()) {
    WEFT_WARN("cannot create a shared-memory segment in %s (%s): %s. The SHM transport needs a writable %s "
              "(in a container: --ipc=host or a tmpfs there); NCCL_SHM_DISABLE=1 turns it off",
              kShmDir, name.c_str(), strerror(errno), kShmDir);
    return ncclSystemError;
  }
  ShmSegment seg;  // removes the name again on any failure below
  seg.name_ = name;
  seg.ownsName_ = true;
  // Reserve every page now: tmpfs would otherwise hand out pages on first touch and SIGBUS when full.
  int rc;
  do { rc = posix_fallocate(fd.get(), 0, (off_t)bytes); } while (rc == EINTR);
  if (rc != 0) {
    WEFT_WARN("cannot reserve %s of shared memory in %s for segment %s: %s (%s free there). The SHM transport "
              "needs that much: in Docker run with --shm-size (e.g. 1g) or --ipc=host; or lower NCCL_BUFFSIZE "
              "or the channel count, or set NCCL_SHM_DISABLE=1",
              mib(bytes).c_str(), kShmDir, name.c_str(), strerror(rc), mib(shmFreeBytes()).c_str());
    return ncclSystemError;
  }
  WEFT_TRY(mapWhole(fd.get(), bytes, name, &seg.ptr_));
  seg.bytes_ = bytes;
  *out = std::move(seg);
  return ncclSuccess;
}

Status ShmSegment::open(const ShmDesc& d, const char* from, ShmSegment* out) {
  WEFT_CHECK_ARG(out != nullptr, "ShmSegment::open: no output");
  WEFT_TRY(checkShmDesc(d, from));
  const std::string name(d.name);
  int f;
  do { f = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0); } while (f < 0 && errno == EINTR);
  if (f < 0) {
    WEFT_WARN("cannot open shared-memory segment %s%s of %s: %s. Do both ranks see the same %s (same container "
              "or --ipc=host)?", kShmDir, name.c_str(), from, strerror(errno), kShmDir);
    return ncclSystemError;
  }
  util::UniqueFd fd(f);
  struct stat st;
  WEFT_SYS_TRY(fstat(fd.get(), &st));
  if ((uint64_t)st.st_size != d.bytes) {
    WEFT_WARN("shared-memory segment %s%s of %s is %lld bytes, but its descriptor says %llu; refused", kShmDir,
              name.c_str(), from, (long long)st.st_size, (unsigned long long)d.bytes);
    return ncclRemoteError;
  }
  ShmSegment seg;
  seg.name_ = name;
  WEFT_TRY(mapWhole(fd.get(), d.bytes, name, &seg.ptr_));
  seg.bytes_ = d.bytes;
  *out = std::move(seg);
  return ncclSuccess;
}

ShmDesc ShmSegment::desc() const {
  ShmDesc d{};
  d.magic = kShmDescMagic;
  d.bytes = bytes_;
  snprintf(d.name, sizeof(d.name), "%s", name_.c_str());
  return d;
}

void ShmSegment::unlinkName() {
  if (!ownsName_) return;
  ownsName_ = false;
  (void)shm_unlink(name_.c_str());  // ENOENT (removed by hand) changes nothing for us
}

void ShmSegment::unlinkAsOnlyOpener() {
  if (!name_.empty()) (void)shm_unlink(name_.c_str());
}

void ShmSegment::reset() {
  unlinkName();
  if (ptr_ != nullptr) munmap(ptr_, bytes_);
  ptr_ = nullptr;
  bytes_ = 0;
  name_.clear();
}

}  // namespace weft::transport::shm
