// The flag protocols' user-buffer access (proto/flag_link.cuh detail::loadUser/storeUser): 1 to
// 16 bytes at any alignment, through the inline 16-, 8- and 4-byte paths and the out-of-line
// byte-wise ones. A load returns exactly the bytes asked for, zeros after them; a store writes
// exactly those bytes and leaves its neighbours alone.
#define WEFT_ARCH_HOST_EMULATION 1
#include "device/proto/flag_link.cuh"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace weft::dev {
namespace {

TEST(UserPack, LoadsAndStoresExactlyTheBytesAskedForAtAnyAlignment) {
  alignas(64) unsigned char src[64], dst[64];
  for (int i = 0; i < 64; i++) src[i] = (unsigned char)(0x40 + i);
  for (int offset = 0; offset < 16; offset++) {
    for (int n = 1; n <= 16; n++) {
      const Pack16 v = detail::loadUser(reinterpret_cast<const char*>(src + offset), n);
      unsigned char got[16];
      std::memcpy(got, &v, 16);
      for (int i = 0; i < 16; i++)
        ASSERT_EQ(got[i], i < n ? src[offset + i] : 0) << "load of " << n << " bytes at +" << offset << ", byte " << i;
      std::memset(dst, 0xEE, sizeof dst);
      detail::storeUser(reinterpret_cast<char*>(dst + offset), v, n);
      for (int i = 0; i < 64; i++) {
        const bool inside = i >= offset && i < offset + n;
        ASSERT_EQ(dst[i], inside ? src[i] : 0xEE) << "store of " << n << " bytes at +" << offset << ", byte " << i;
      }
    }
  }
}

}  // namespace
}  // namespace weft::dev
