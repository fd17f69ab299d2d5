#include "transport/p2p/conn_layout.h"

namespace weft::transport {

size_t ConnLayout::recvBuffer(const ConnectionPlan& receiverPlan, int channel, int sender) const {
  size_t index = 0;
  for (int c = 0; c < receiverPlan.nChannels; ++c) {
    for (int p = 0; p < receiverPlan.nRanks; ++p) {
      if (!receiverPlan.recvOn[c][p]) continue;
      if (c == channel && p == sender) return buffersStart() + index * bufferBytes;
      ++index;
    }
  }
  return (size_t)-1;
}

}  // namespace weft::transport
