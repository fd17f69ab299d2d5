// Reads frames from a non-blocking socket a piece at a time, so that one event loop can serve
// many connections and a slow or silent peer never blocks the others. The header is validated
// (wire::validateHeader) before the payload buffer is sized; the magic is checked as soon as its
// four bytes are in, so garbage is dropped early.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/wire.h"

namespace weft::bootstrap {

class FrameReader {
 public:
  enum class Event {
    kNeedMore,  // no complete frame yet; poll again
    kFrame,     // header() and payload() hold a complete, validated frame
    kClosed,    // the peer closed the stream (see midFrame() for a truncated frame)
    kInvalid,   // the bytes are not a valid frame; why() says how. Close the connection.
    kFailed,    // recv() failed; why() holds strerror
  };

  explicit FrameReader(uint64_t jobKey) : jobKey_(jobKey) {}

  // Reads what the socket has, without blocking, until one frame is complete or no more bytes are
  // available. The frame returned by kFrame stays valid until the next call.
  Event pump(int fd);

  const wire::FrameHeader& header() const { return header_; }
  std::vector<char>& payload() { return payload_; }
  const std::string& why() const { return why_; }

  // True when the stream stopped inside a frame (some but not all of its bytes arrived).
  bool midFrame() const { return headerGot_ > 0; }
  // Bytes received on this stream so far, all frames included.
  uint64_t bytesReceived() const { return bytesReceived_; }

 private:
  uint64_t jobKey_;
  wire::FrameHeader header_{};
  size_t headerGot_ = 0;
  bool headerValid_ = false;
  std::vector<char> payload_;
  size_t payloadGot_ = 0;
  bool frameDone_ = false;
  uint64_t bytesReceived_ = 0;
  std::string why_;
};

}  // namespace weft::bootstrap
