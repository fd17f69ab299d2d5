#include "bootstrap/frame_reader.h"

#include <cstring>

namespace weft::bootstrap {

FrameReader::Event FrameReader::pump(int fd) {
  if (frameDone_) {  // the previous frame was handed out; start the next one
    frameDone_ = false;
    headerGot_ = 0;
    headerValid_ = false;
    payloadGot_ = 0;
    payload_.clear();
  }
  auto readInto = [&](void* dst, size_t want, size_t* got) -> Event {
    ssize_t n = recvSome(fd, dst, want);
    if (n > 0) {
      *got += (size_t)n;
      bytesReceived_ += (uint64_t)n;
      return Event::kFrame;  // progress: keep going
    }
    if (n == 0) {
      if (headerGot_ > 0) {
        why_ = headerValid_ ? "stream ended after " + std::to_string(payloadGot_) + " of " +
                                  std::to_string(header_.length) + " payload bytes"
                            : "stream ended after " + std::to_string(headerGot_) + " of " +
                                  std::to_string(sizeof(wire::FrameHeader)) + " header bytes";
      }
      return Event::kClosed;
    }
    if (n == -EAGAIN) return Event::kNeedMore;
    if (ioFromErrno((int)-n) == Io::kClosed) return Event::kClosed;
    why_ = strerror((int)-n);
    return Event::kFailed;
  };

  while (!headerValid_) {
    char* dst = reinterpret_cast<char*>(&header_) + headerGot_;
    Event e = readInto(dst, sizeof(header_) - headerGot_, &headerGot_);
    if (e != Event::kFrame) return e;
    if (!wire::magicPrefixOk(&header_, headerGot_)) {
      uint32_t magic = 0;
      memcpy(&magic, &header_, headerGot_ < 4 ? headerGot_ : 4);
      char buf[96];
      snprintf(buf, sizeof(buf), "wrong magic 0x%08x (not a weft bootstrap peer)", magic);
      why_ = buf;
      return Event::kInvalid;
    }
    if (headerGot_ < sizeof(header_)) continue;
    if (!wire::validateHeader(header_, jobKey_, &why_)) return Event::kInvalid;
    headerValid_ = true;
    // Sized only after validation: at most kMaxDataFrameBytes.
    payload_.resize(header_.length);
  }
  while (payloadGot_ < header_.length) {
    Event e = readInto(payload_.data() + payloadGot_, header_.length - payloadGot_, &payloadGot_);
    if (e != Event::kFrame) return e;
  }
  frameDone_ = true;
  headerGot_ = 0;  // at a frame boundary: a close now is not a truncation
  return Event::kFrame;
}

}  // namespace weft::bootstrap
