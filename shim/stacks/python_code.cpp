#include "shim/stacks/python_code.h"

#include <algorithm>

namespace msprobe::shim::python_internal {

namespace {

void append_utf8(uint32_t c, std::string *out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

// 3.8, 3.9: co_lnotab, (address increment, signed line increment) pairs.
int lnotab_line(const uint8_t *p, const uint8_t *end, int first, intptr_t q) {
  int line = first;
  intptr_t addr = 0;
  for (; p + 1 < end; p += 2) {
    addr += p[0];
    if (addr > q) break;
    line += static_cast<int8_t>(p[1]);
  }
  return line;
}

// 3.10: co_linetable, (range length, signed line delta or -128 = no line) pairs.
int linetable_line(const uint8_t *p, const uint8_t *end, int first, intptr_t q) {
  int line = first;
  intptr_t range_end = 0;
  for (; p + 1 < end; p += 2) {
    const intptr_t start = range_end;
    range_end += p[0];
    const auto delta = static_cast<int8_t>(p[1]);
    int here = -1;
    if (delta != -128) here = line += delta;
    if (start != range_end && start <= q && q < range_end) return here;
  }
  return -1;
}

// 3.11+: the location table (Objects/locations.md).
int locations_line(const uint8_t *p, const uint8_t *end, int first, intptr_t q) {
  auto varint = [&p, end]() {
    if (p >= end) return uint32_t{0};
    uint32_t b = *p++, v = b & 63u, shift = 0;
    while ((b & 64u) != 0 && p < end && shift < 28) {
      b = *p++;
      shift += 6;
      v |= (b & 63u) << shift;
    }
    return v;
  };
  auto svarint = [&varint]() {
    const uint32_t u = varint();
    return (u & 1u) != 0 ? -static_cast<int>(u >> 1) : static_cast<int>(u >> 1);
  };
  int line = first;
  intptr_t addr = 0;
  while (p < end) {
    const uint8_t head = *p++;
    if ((head & 0x80u) == 0) return -1;  // not at an entry: a table we do not understand
    const int kind = (head >> 3) & 15, length = (head & 7) + 1;
    int delta = 0;
    if (kind == 15) {
    } else if (kind == 14) {
      delta = svarint();
      varint();
      varint();
      varint();
    } else if (kind == 13) {
      delta = svarint();
    } else if (kind >= 10) {
      delta = kind - 10;
      p += 2;
    } else {
      p += 1;
    }
    line += delta;
    const intptr_t next = addr + 2 * intptr_t{length};
    if (addr <= q && q < next) return kind == 15 ? -1 : line;
    addr = next;
  }
  return -1;
}

}  // namespace

bool read_str(const PyLayout &L, uintptr_t unicode_type, uintptr_t s, std::string *out) {
  out->clear();
  if (s == 0 || type_of(s) != unicode_type) return false;
  const auto state = load_at<uint32_t>(s, kStrState);
  const unsigned kind = (state >> 2) & 7u;
  const bool compact = (state >> 5) & 1u, ascii = (state >> 6) & 1u;
  const auto length = std::min(load_at<int64_t>(s, kStrLength), kMaxString);
  if (!compact || length < 0) return false;
  if (ascii) {
    out->assign(reinterpret_cast<const char *>(s + L.str_ascii_data), static_cast<size_t>(length));
    return true;
  }
  if (kind != 1 && kind != 2 && kind != 4) return false;
  const uintptr_t data = s + L.str_compact_data;
  for (int64_t i = 0; i < length; ++i) {
    const uint32_t c = kind == 1   ? load_at<uint8_t>(data, static_cast<size_t>(i))
                       : kind == 2 ? load_at<uint16_t>(data, static_cast<size_t>(i) * 2)
                                   : load_at<uint32_t>(data, static_cast<size_t>(i) * 4);
    append_utf8(c, out);
  }
  return true;
}

int decode_line(const PyLayout &L, uintptr_t bytes_type, uintptr_t code, intptr_t q) {
  const int first = load_at<int>(code, L.co_firstlineno);
  if (q < 0) return first;
  const auto table = load_at<uintptr_t>(code, L.co_table);
  if (table == 0 || type_of(table) != bytes_type) return -1;
  const int64_t size = load_at<int64_t>(table, kVarSize);
  if (size < 0 || size > kMaxTable) return -1;
  const auto *p = reinterpret_cast<const uint8_t *>(table + kBytesData);
  const uint8_t *end = p + size;
  if (L.minor <= 9) return lnotab_line(p, end, first, q);
  if (L.minor == 10) return linetable_line(p, end, first, q);
  return locations_line(p, end, first, q);
}

}  // namespace msprobe::shim::python_internal
