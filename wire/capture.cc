// Capture files: pcap (us/ns, either byte order) and pcapng, read and write.
//
// The reader maps the whole file and hands out views into the mapping, so reading a record costs
// a few bounds checks and loads and never allocates. Every length read from the file is checked
// against the bytes actually present before it is used: captures come from other vendors' tools
// and from crashed runs, and a corrupt one must produce an error that names the byte offset, not
// a crash.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>

#include "wire/wire.h"

namespace mrc::wire {
namespace {

// A record larger than this is treated as corruption rather than allocated or trusted.
constexpr uint32_t kMaxRecordBytes = 256u << 20;

constexpr uint32_t kPcapMagicUs = 0xa1b2c3d4;
constexpr uint32_t kPcapMagicNs = 0xa1b23c4d;
constexpr size_t kPcapHeaderBytes = 24;
constexpr size_t kPcapRecordHeaderBytes = 16;

constexpr uint32_t kBlockShb = 0x0A0D0D0A;  // same value in both byte orders
constexpr uint32_t kBlockIdb = 0x00000001;
constexpr uint32_t kBlockOpb = 0x00000002;  // obsolete Packet Block, still written by old tools
constexpr uint32_t kBlockSpb = 0x00000003;
constexpr uint32_t kBlockEpb = 0x00000006;
constexpr uint32_t kByteOrderMagic = 0x1A2B3C4D;
constexpr size_t kBlockMinBytes = 12;  // type, length, trailing length
constexpr size_t kShbMinBytes = 28;

constexpr uint16_t kOptEnd = 0;
constexpr uint16_t kOptComment = 1;
constexpr uint16_t kOptShbUserAppl = 4;
constexpr uint16_t kOptIfTsresol = 9;
constexpr uint16_t kOptIfTsoffset = 14;

constexpr uint32_t kLinkTypeEthernet = 1;
constexpr uint32_t kLinkTypeRaw = 101;
constexpr uint32_t kLinkTypeIpv4 = 228;
constexpr uint32_t kLinkTypeIpv6 = 229;

constexpr uint64_t kNsPerSecond = 1'000'000'000;

__extension__ typedef unsigned __int128 U128;
__extension__ typedef __int128 I128;

uint16_t load16(const std::byte* p, bool swap) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return swap ? __builtin_bswap16(v) : v;
}
uint32_t load32(const std::byte* p, bool swap) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return swap ? __builtin_bswap32(v) : v;
}
uint64_t load64(const std::byte* p, bool swap) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return swap ? __builtin_bswap64(v) : v;
}

std::optional<LinkType> link_from_file(uint32_t link_type) {
  switch (link_type) {
    case kLinkTypeEthernet:
      return LinkType::kEthernet;
    case kLinkTypeRaw:
    case kLinkTypeIpv4:
    case kLinkTypeIpv6:
      return LinkType::kRawIp;
    default:
      return std::nullopt;
  }
}

uint32_t link_to_file(LinkType link) {
  return link == LinkType::kEthernet ? kLinkTypeEthernet : kLinkTypeRaw;
}

constexpr size_t pad4(size_t n) {
  return (n + 3) & ~size_t{3};
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Timestamp units of one pcapng interface, turned into nanoseconds.
struct TsResolution {
  enum class Kind : uint8_t { kMultiply, kDivide, kBinary };
  Kind kind = Kind::kMultiply;
  uint64_t factor = 1000;  // power of ten for kMultiply/kDivide, exponent for kBinary
  int64_t offset_s = 0;    // if_tsoffset

  // False when the value does not fit in 64-bit nanoseconds since the epoch.
  bool to_ns(uint64_t ts, uint64_t& ns) const {
    U128 v;
    switch (kind) {
      case Kind::kMultiply:
        v = U128{ts} * factor;
        break;
      case Kind::kDivide:
        v = ts / factor;
        break;
      case Kind::kBinary:
      default:
        v = (U128{ts} * kNsPerSecond) >> factor;
        break;
    }
    if (offset_s != 0) {
      I128 shifted = static_cast<I128>(v) + I128{offset_s} * static_cast<int64_t>(kNsPerSecond);
      if (shifted < 0) return false;
      v = static_cast<U128>(shifted);
    }
    if (v > std::numeric_limits<uint64_t>::max()) return false;
    ns = static_cast<uint64_t>(v);
    return true;
  }
};

struct Interface {
  uint32_t link_type = 0;
  std::optional<LinkType> link;
  uint32_t snaplen = 0;
  TsResolution ts;
  size_t declared_at = 0;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------------------------
struct CaptureReader::Impl {
  std::string label = "<memory>";
  const std::byte* base = nullptr;
  size_t size = 0;
  size_t pos = 0;
  void* mapping = nullptr;
  size_t mapping_bytes = 0;
  size_t populated = 0;   // the mapping's page tables are filled up to here (see populate_ahead)
  size_t prefetched = 0;  // cache lines are requested up to here (see CaptureReader::next)
  size_t released = 0;    // the page tables before here were dropped (see release_behind)
  // Input that cannot be mapped (pipe, /dev/stdin) is read as it is parsed, into chunks: a
  // record never spans two (the unread rest moves to a fresh chunk, the old one stays). Only the
  // chunk being read and the one holding the record returned last are kept, so that record stays
  // valid through the next call (as the checker's read-ahead needs) while memory stays two
  // chunks, whatever the input's length.
  struct Chunk {
    std::unique_ptr<std::byte[]> bytes;
    size_t cap = 0;
    uint64_t seq = 0;
  };
  static constexpr size_t kChunkBytes = size_t{4} << 20;
  static constexpr size_t kFirstChunkBytes = size_t{64} << 10;
  uint64_t next_chunk_seq = 0;
  uint64_t held_chunk = UINT64_MAX;  // seq of the chunk of the record returned last
  int stream_fd = -1;
  bool stream_eof = false;
  size_t stream_offset = 0;  // offset in the input of base[0]
  std::deque<Chunk> chunks;
  bool pcapng = false;
  bool swap = false;
  bool failed = false;
  std::string error;
  uint64_t records = 0;

  // pcap
  uint32_t ns_per_frac = 1000;
  LinkType pcap_link = LinkType::kEthernet;

  // pcapng, per section
  std::vector<Interface> interfaces;

  ~Impl() {
    unmap();
    close_stream();
  }

  void close_stream() {
    if (stream_fd >= 0) ::close(stream_fd);
    stream_fd = -1;
    stream_eof = false;
    stream_offset = 0;
    chunks.clear();
    held_chunk = UINT64_MAX;
  }

  // Makes `need` bytes from pos readable when the input has them (a stream reads on; a mapping
  // or memory has all it will have). False on a read error, which is then the error.
  bool fill(size_t need) {
    if (stream_fd < 0) return true;
    while (size - pos < need && !stream_eof) {
      if (chunks.empty() || pos + need > chunks.back().cap || chunks.back().cap - size < 4096) {
        Chunk c;
        // The first chunk small: many piped inputs are (a fuzzer's are).
        const size_t unit = next_chunk_seq == 0 ? kFirstChunkBytes : kChunkBytes;
        c.cap = std::max(unit, need + unit / 4);
        c.bytes.reset(new std::byte[c.cap]);
        c.seq = next_chunk_seq++;
        if (size > pos) std::memcpy(c.bytes.get(), base + pos, size - pos);
        stream_offset += pos;
        size -= pos;
        pos = 0;
        std::erase_if(chunks, [&](const Chunk& old) { return old.seq != held_chunk; });
        chunks.push_back(std::move(c));
        base = chunks.back().bytes.get();
      }
      std::byte* to = chunks.back().bytes.get() + size;
      const ssize_t n = ::read(stream_fd, to, chunks.back().cap - size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail_io("cannot read");
      if (n == 0) stream_eof = true;
      size += static_cast<size_t>(n);
    }
    return true;
  }

  void unmap() {
    if (mapping != nullptr) munmap(mapping, mapping_bytes);
    mapping = nullptr;
    mapping_bytes = 0;
    populated = 0;
    prefetched = 0;
    released = 0;
  }

  // Faulting the mapping in page by page costs a trap per 16 pages (the kernel's fault-around);
  // MADV_POPULATE_READ fills the page tables of a whole window in one call, ahead of the reader.
  // Windows keep it bounded (a huge file is not all mapped in at once). Kernels before 5.14 say
  // EINVAL: then the faults do it, as before.
  static constexpr size_t kPopulateWindow = size_t{4} << 20;
  static constexpr size_t kPrefetchAhead = size_t{16} << 10;
  void populate_ahead() {
#if defined(MADV_POPULATE_READ)
    const size_t end = std::min(mapping_bytes, populated + kPopulateWindow);
    if (::madvise(static_cast<std::byte*>(mapping) + populated, end - populated,
                  MADV_POPULATE_READ) != 0) {
      populated = mapping_bytes;
      return;
    }
    populated = end;
#else
    populated = mapping_bytes;
#endif
  }

  // The pages the reader left far behind leave the process (MADV_DONTNEED on a read-only
  // private file mapping drops page-table entries only: the file stays in the page cache, and a
  // caller who reads an old record again faults it back in, unchanged). Without this, the
  // resident set grew with the capture: 1 GiB for a 1 GiB file.
  static constexpr size_t kKeepBehind = size_t{32} << 20;
  void release_behind() {
    static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t until = (pos - kKeepBehind) & ~(page - 1);
    if (until <= released) return;
    ::madvise(static_cast<std::byte*>(mapping) + released, until - released, MADV_DONTNEED);
    released = until;
  }

  void reset(std::string new_label) {
    unmap();
    close_stream();
    label = std::move(new_label);
    base = nullptr;
    size = pos = 0;
    pcapng = swap = failed = false;
    error.clear();
    records = 0;
    ns_per_frac = 1000;
    pcap_link = LinkType::kEthernet;
    interfaces.clear();
  }

  // "x.pcap: truncated record header at byte 1234 (need 16 bytes, have 7)"
  bool fail(std::string_view what, size_t at, std::string_view detail = {}) {
    failed = true;
    error = label;
    error += ": ";
    error += what;
    error += " at byte ";
    error += std::to_string(stream_offset + at);
    if (!detail.empty()) {
      error += " (";
      error += detail;
      error += ")";
    }
    return false;
  }
  bool fail_io(std::string_view what) {
    failed = true;
    error = label + ": " + std::string(what) + ": " + std::strerror(errno);
    return false;
  }
  static std::string need_have(size_t need, size_t have) {
    return "need " + std::to_string(need) + " bytes, have " + std::to_string(have);
  }

  bool load_file(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail_io("cannot open");
    struct stat st;
    if (fstat(fd, &st) != 0) {
      fail_io("cannot stat");
      ::close(fd);
      return false;
    }
    if (S_ISREG(st.st_mode) && st.st_size > 0) {
      void* m = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (m == MAP_FAILED) {
        fail_io("cannot map");
        ::close(fd);
        return false;
      }
      ::close(fd);
      mapping = m;
      mapping_bytes = static_cast<size_t>(st.st_size);
      madvise(m, mapping_bytes, MADV_SEQUENTIAL);
      base = static_cast<const std::byte*>(m);
      size = mapping_bytes;
      return true;
    }
    // Not mappable (pipe, character device) or empty: read as it is parsed (see fill()).
    stream_fd = fd;
    return true;
  }

  bool start() {
    if (!fill(kPcapHeaderBytes)) return false;
    if (size == 0) return fail("empty file, no pcap or pcapng header", 0);
    if (size < 4) return fail("truncated file header", 0, need_have(4, size));
    uint32_t magic = load32(base, false);
    if (magic == kBlockShb) {
      pcapng = true;
      return read_pcapng_block(nullptr) != Step::kError;
    }
    if (magic == kPcapMagicUs || magic == kPcapMagicNs) {
      swap = false;
    } else if (magic == __builtin_bswap32(kPcapMagicUs) ||
               magic == __builtin_bswap32(kPcapMagicNs)) {
      swap = true;
    } else {
      return fail("bad magic " + hex32(magic), 0, "not a pcap or pcapng file");
    }
    if (size < kPcapHeaderBytes) {
      return fail("truncated pcap global header", 0, need_have(kPcapHeaderBytes, size));
    }
    ns_per_frac = load32(base, swap) == kPcapMagicNs ? 1 : 1000;
    uint16_t major = load16(base + 4, swap);
    uint16_t minor = load16(base + 6, swap);
    if (major != 2) {
      return fail("unsupported pcap version " + std::to_string(major) + "." + std::to_string(minor),
                  4, "only 2.x is defined");
    }
    // The upper bits of the link type field carry FCS information; the type is the low 16.
    uint32_t link_type = load32(base + 20, swap) & 0xFFFF;
    auto link = link_from_file(link_type);
    if (!link) return fail_link(link_type, 20);
    pcap_link = *link;
    pos = kPcapHeaderBytes;
    return true;
  }

  bool fail_link(uint32_t link_type, size_t at, const Interface* iface = nullptr,
                 uint32_t iface_id = 0) {
    std::string what = "unsupported link type " + std::to_string(link_type);
    std::string detail = "supported: 1 Ethernet, 101/228/229 raw IP";
    if (iface != nullptr) {
      what += " on interface " + std::to_string(iface_id);
      detail = "interface declared at byte " + std::to_string(iface->declared_at) + "; " + detail;
    }
    return fail(what, at, detail);
  }

  bool next_pcap(CaptureRecord& rec) {
    if (!fill(kPcapRecordHeaderBytes)) return false;
    size_t remain = size - pos;
    if (remain == 0) return false;
    if (remain < kPcapRecordHeaderBytes) {
      return fail("truncated record header", pos, need_have(kPcapRecordHeaderBytes, remain));
    }
    const std::byte* p = base + pos;
    uint32_t sec = load32(p, swap);
    uint32_t frac = load32(p + 4, swap);
    uint32_t caplen = load32(p + 8, swap);
    uint32_t orig_len = load32(p + 12, swap);
    if (caplen > kMaxRecordBytes) {
      return fail(
          "caplen " + std::to_string(caplen) + " exceeds limit " + std::to_string(kMaxRecordBytes),
          pos + 8);
    }
    if (!fill(kPcapRecordHeaderBytes + caplen)) return false;
    remain = size - pos;
    p = base + pos;
    remain -= kPcapRecordHeaderBytes;
    if (caplen > remain) {
      return fail("truncated record data", pos + kPcapRecordHeaderBytes, need_have(caplen, remain));
    }
    rec.ts_ns = uint64_t{sec} * kNsPerSecond + uint64_t{frac} * ns_per_frac;
    rec.orig_len = orig_len;
    rec.data = Bytes(p + kPcapRecordHeaderBytes, caplen);
    rec.link = pcap_link;
    rec.interface_id = 0;
    rec.comment = {};
    pos += kPcapRecordHeaderBytes + caplen;
    ++records;
    return true;
  }

  enum class Step : uint8_t { kRecord, kOther, kEof, kError };

  // Walks the options of one block. `at` is the file offset of `p`. Calls fn(code, value,
  // value_offset) for each option; fn returns false to stop with an error it has set.
  template <typename Fn>
  bool for_each_option(const std::byte* p, size_t len, size_t at, const char* block, Fn&& fn) {
    size_t off = 0;
    while (off < len) {
      size_t left = len - off;
      if (left < 4) {
        return fail(std::string("truncated option list in ") + block, at + off,
                    "option header " + need_have(4, left));
      }
      uint16_t code = load16(p + off, swap);
      uint16_t olen = load16(p + off + 2, swap);
      if (code == kOptEnd) return true;
      if (pad4(olen) > left - 4) {
        return fail(std::string("truncated option list in ") + block, at + off,
                    "option " + std::to_string(code) + " of length " + std::to_string(olen) + ": " +
                        need_have(pad4(olen), left - 4));
      }
      if (!fn(code, Bytes(p + off + 4, olen), at + off)) return false;
      off += 4 + pad4(olen);
    }
    return true;
  }

  static std::string_view comment_of(Bytes v) {
    std::string_view s(reinterpret_cast<const char*>(v.data()), v.size());
    // Some writers count a terminating NUL in the option length.
    while (!s.empty() && s.back() == '\0') s.remove_suffix(1);
    return s;
  }

  Step parse_shb(const std::byte* p, size_t at) {
    uint16_t major = load16(p + 12, swap);
    uint16_t minor = load16(p + 14, swap);
    if (major != 1) {
      fail("unsupported pcapng version " + std::to_string(major) + "." + std::to_string(minor),
           at + 12, "only 1.x is defined");
      return Step::kError;
    }
    interfaces.clear();
    return Step::kOther;
  }

  Step parse_idb(const std::byte* body, size_t body_len, size_t at) {
    if (body_len < 8) {
      fail("IDB too short", at, "block body " + need_have(8, body_len));
      return Step::kError;
    }
    Interface iface;
    iface.link_type = load16(body, swap);
    iface.link = link_from_file(iface.link_type);
    iface.snaplen = load32(body + 4, swap);
    iface.declared_at = stream_offset + at;  // in the input, like error offsets
    iface.ts = TsResolution{};               // default: microseconds
    bool ok = for_each_option(
        body + 8, body_len - 8, at + 16, "IDB", [&](uint16_t code, Bytes v, size_t opt_at) {
          if (code == kOptIfTsresol) {
            if (v.size() != 1) {
              return fail("if_tsresol option has length " + std::to_string(v.size()), opt_at,
                          "expected 1");
            }
            uint8_t r = static_cast<uint8_t>(v[0]);
            uint8_t exp = r & 0x7F;
            if (r & 0x80) {
              if (exp > 63) return fail("unsupported if_tsresol 2^-" + std::to_string(exp), opt_at);
              iface.ts.kind = TsResolution::Kind::kBinary;
              iface.ts.factor = exp;
            } else {
              if (exp > 19)
                return fail("unsupported if_tsresol 10^-" + std::to_string(exp), opt_at);
              uint64_t p10 = 1;
              for (int i = 0; i < (exp > 9 ? exp - 9 : 9 - exp); ++i) p10 *= 10;
              iface.ts.kind = exp > 9 ? TsResolution::Kind::kDivide : TsResolution::Kind::kMultiply;
              iface.ts.factor = p10;
            }
          } else if (code == kOptIfTsoffset) {
            if (v.size() != 8) {
              return fail("if_tsoffset option has length " + std::to_string(v.size()), opt_at,
                          "expected 8");
            }
            iface.ts.offset_s = static_cast<int64_t>(load64(v.data(), swap));
          }
          return true;
        });
    if (!ok) return Step::kError;
    interfaces.push_back(iface);
    return Step::kOther;
  }

  // Common tail of EPB and the obsolete packet block.
  Step emit_packet(CaptureRecord& rec, const char* block, size_t at, const std::byte* body,
                   size_t body_len, size_t fixed, uint32_t iface_id, uint64_t ts, uint32_t caplen,
                   uint32_t orig_len) {
    if (iface_id >= interfaces.size()) {
      fail(std::string(block) + " references unknown interface " + std::to_string(iface_id), at,
           "section has " + std::to_string(interfaces.size()) + " interface(s)");
      return Step::kError;
    }
    const Interface& iface = interfaces[iface_id];
    if (!iface.link) {
      fail_link(iface.link_type, at, &iface, iface_id);
      return Step::kError;
    }
    if (caplen > kMaxRecordBytes) {
      fail("caplen " + std::to_string(caplen) + " exceeds limit " + std::to_string(kMaxRecordBytes),
           at + 8 + 12);
      return Step::kError;
    }
    if (pad4(caplen) > body_len - fixed) {
      fail(std::string(block) + " caplen " + std::to_string(caplen) + " exceeds its block", at,
           "packet data " + need_have(pad4(caplen), body_len - fixed));
      return Step::kError;
    }
    uint64_t ts_ns;
    if (!iface.ts.to_ns(ts, ts_ns)) {
      fail(std::string(block) + " timestamp " + std::to_string(ts) +
               " does not fit in 64-bit nanoseconds",
           at);
      return Step::kError;
    }
    std::string_view comment;
    size_t opt_off = fixed + pad4(caplen);
    bool ok = for_each_option(body + opt_off, body_len - opt_off, at + 8 + opt_off, block,
                              [&](uint16_t code, Bytes v, size_t) {
                                if (code == kOptComment && comment.empty()) comment = comment_of(v);
                                return true;
                              });
    if (!ok) return Step::kError;
    rec.ts_ns = ts_ns;
    rec.orig_len = orig_len;
    rec.data = Bytes(body + fixed, caplen);
    rec.link = *iface.link;
    rec.interface_id = iface_id;
    rec.comment = comment;
    return Step::kRecord;
  }

  Step parse_spb(CaptureRecord& rec, const std::byte* body, size_t body_len, size_t at) {
    if (body_len < 4) {
      fail("SPB too short", at, "block body " + need_have(4, body_len));
      return Step::kError;
    }
    if (interfaces.empty()) {
      fail("SPB references unknown interface 0", at, "section has 0 interface(s)");
      return Step::kError;
    }
    const Interface& iface = interfaces[0];
    if (!iface.link) {
      fail_link(iface.link_type, at, &iface, 0);
      return Step::kError;
    }
    uint32_t orig_len = load32(body, swap);
    // The SPB has no caplen: the data is min(original length, snaplen), padded to the block.
    size_t caplen = std::min<size_t>(orig_len, body_len - 4);
    if (iface.snaplen != 0) caplen = std::min<size_t>(caplen, iface.snaplen);
    rec.ts_ns = 0;
    rec.orig_len = orig_len;
    rec.data = Bytes(body + 4, caplen);
    rec.link = *iface.link;
    rec.interface_id = 0;
    rec.comment = {};
    return Step::kRecord;
  }

  // Reads one pcapng block at pos. `rec` is null while opening (only the SHB is expected).
  Step read_pcapng_block(CaptureRecord* rec) {
    if (!fill(12)) return Step::kError;
    size_t remain = size - pos;
    if (remain == 0) return Step::kEof;
    size_t at = pos;
    const std::byte* p = base + pos;
    if (remain < 8) {
      fail("truncated pcapng block header", at, need_have(8, remain));
      return Step::kError;
    }
    uint32_t type = load32(p, swap);
    if (type == kBlockShb) {
      // A section may switch byte order; its byte-order magic says which.
      if (remain < 12) {
        fail("truncated pcapng section header", at, need_have(kShbMinBytes, remain));
        return Step::kError;
      }
      uint32_t bom = load32(p + 8, false);
      if (bom == kByteOrderMagic) {
        swap = false;
      } else if (bom == __builtin_bswap32(kByteOrderMagic)) {
        swap = true;
      } else {
        fail("bad pcapng byte-order magic " + hex32(bom), at + 8, "expected 0x1a2b3c4d");
        return Step::kError;
      }
    } else if (rec == nullptr) {
      fail("bad magic " + hex32(type), at, "pcapng must start with a section header block");
      return Step::kError;
    }
    uint32_t len = load32(p + 4, swap);
    size_t min_len = type == kBlockShb ? kShbMinBytes : kBlockMinBytes;
    if (len < min_len) {
      fail("pcapng block length " + std::to_string(len) + " is below the minimum " +
               std::to_string(min_len),
           at);
      return Step::kError;
    }
    if (len % 4 != 0) {
      fail("pcapng block length " + std::to_string(len) + " is not a multiple of 4", at);
      return Step::kError;
    }
    // The record limit (plus its block) bounds a block: a stream has no size that would, and a
    // file or a stream says the same of the same bytes.
    if (len > kMaxRecordBytes + (size_t{1} << 20)) {
      fail("pcapng block length " + std::to_string(len) + " exceeds limit " +
               std::to_string(kMaxRecordBytes + (size_t{1} << 20)),
           at);
      return Step::kError;
    }
    if (stream_fd >= 0) {
      if (!fill(len)) return Step::kError;
      remain = size - pos;
      at = pos;
      p = base + pos;
    }
    if (len > remain) {
      fail("truncated pcapng block", at,
           "block type " + hex32(type) + " length " + std::to_string(len) + ", have " +
               std::to_string(remain) + " bytes");
      return Step::kError;
    }
    uint32_t trailer = load32(p + len - 4, swap);
    if (trailer != len) {
      fail("block trailer length mismatch", at + len - 4,
           "header says " + std::to_string(len) + ", trailer says " + std::to_string(trailer));
      return Step::kError;
    }
    const std::byte* body = p + 8;
    size_t body_len = len - kBlockMinBytes;
    Step step = Step::kOther;
    switch (type) {
      case kBlockShb:
        step = parse_shb(p, at);
        break;
      case kBlockIdb:
        step = parse_idb(body, body_len, at);
        break;
      case kBlockEpb:
        if (body_len < 20) {
          fail("EPB too short", at, "block body " + need_have(20, body_len));
          return Step::kError;
        }
        step = emit_packet(*rec, "EPB", at, body, body_len, 20, load32(body, swap),
                           (uint64_t{load32(body + 4, swap)} << 32) | load32(body + 8, swap),
                           load32(body + 12, swap), load32(body + 16, swap));
        break;
      case kBlockOpb:
        if (body_len < 20) {
          fail("packet block too short", at, "block body " + need_have(20, body_len));
          return Step::kError;
        }
        step = emit_packet(*rec, "packet block", at, body, body_len, 20, load16(body, swap),
                           (uint64_t{load32(body + 4, swap)} << 32) | load32(body + 8, swap),
                           load32(body + 12, swap), load32(body + 16, swap));
        break;
      case kBlockSpb:
        step = parse_spb(*rec, body, body_len, at);
        break;
      default:
        break;  // name resolution, statistics, custom ...: not needed to read packets
    }
    if (step == Step::kError) return step;
    pos += len;
    if (step == Step::kRecord) ++records;
    return step;
  }

  bool next_pcapng(CaptureRecord& rec) {
    for (;;) {
      switch (read_pcapng_block(&rec)) {
        case Step::kRecord:
          return true;
        case Step::kOther:
          continue;
        case Step::kEof:
        case Step::kError:
          return false;
      }
    }
  }
};

CaptureReader::CaptureReader() : impl_(std::make_unique<Impl>()) {}
CaptureReader::~CaptureReader() = default;

bool CaptureReader::open(const std::string& path) {
  impl_->reset(path);
  if (!impl_->load_file(path)) return false;
  return impl_->start();
}

bool CaptureReader::open_memory(Bytes data) {
  impl_->reset("<memory>");
  impl_->base = data.data();
  impl_->size = data.size();
  return impl_->start();
}

bool CaptureReader::next(CaptureRecord& rec) {
  Impl& d = *impl_;
  if (d.failed || d.base == nullptr) return false;
  // A window ahead of the record about to be read (records end at most kMaxRecordBytes later;
  // a longer one simply faults in).
  if (d.pos + Impl::kPopulateWindow / 2 > d.populated && d.populated < d.mapping_bytes) {
    d.populate_ahead();
    if (d.pos > Impl::kKeepBehind + Impl::kPopulateWindow) d.release_behind();
  }
  // The bytes a little ahead of the reader are requested from memory now, so that they are in the
  // cache by the time the caller reads them (the ICRC reads every byte). The page cache is a
  // scatter of 4 KiB pages, which the hardware prefetcher does not follow from one to the next.
  // Prefetching is a hint: lines of pages without page tables are skipped, nothing faults.
  if (d.mapping != nullptr) {
    const size_t until = std::min(d.mapping_bytes, d.pos + Impl::kPrefetchAhead);
    if (d.prefetched < d.pos) d.prefetched = d.pos & ~size_t{63};
    for (; d.prefetched < until; d.prefetched += 64) __builtin_prefetch(d.base + d.prefetched);
  }
  const bool ok = d.pcapng ? d.next_pcapng(rec) : d.next_pcap(rec);
  if (ok && !d.chunks.empty()) d.held_chunk = d.chunks.back().seq;
  return ok;
}

const std::string& CaptureReader::error() const {
  return impl_->error;
}
bool CaptureReader::is_pcapng() const {
  return impl_->pcapng;
}
uint64_t CaptureReader::records_read() const {
  return impl_->records;
}

// ---------------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------------
namespace {
constexpr size_t kWriteBufferBytes = 1u << 20;
}  // namespace

struct CaptureWriter::Impl {
  std::string path;
  std::string tmp_path;
  int fd = -1;
  CaptureFormat format = CaptureFormat::kPcap;
  uint32_t snaplen = 0;
  std::vector<std::byte> buf;
  size_t used = 0;
  bool failed = false;
  std::string error;

  ~Impl() { abandon(); }

  // Drops the half-written file: a run that did not close() cleanly leaves nothing behind.
  void abandon() {
    if (fd >= 0) {
      ::close(fd);
      fd = -1;
      ::unlink(tmp_path.c_str());
    }
  }

  bool fail(std::string what) {
    failed = true;
    error = (path.empty() ? std::string("<capture>") : path) + ": " + what;
    return false;
  }
  bool fail_errno(std::string what) { return fail(what + ": " + std::strerror(errno)); }

  bool write_all(const std::byte* p, size_t n) {
    while (n > 0) {
      ssize_t w = ::write(fd, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return fail_errno("write to " + tmp_path + " failed");
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }

  bool flush() {
    if (used == 0) return true;
    size_t n = used;
    used = 0;
    return write_all(buf.data(), n);
  }

  bool append(const void* p, size_t n) {
    if (n == 0) return true;  // an empty span may carry a null pointer, which memcpy rejects
    if (n > buf.size() - used) {
      if (!flush()) return false;
      if (n > buf.size()) return write_all(static_cast<const std::byte*>(p), n);
    }
    std::memcpy(buf.data() + used, p, n);
    used += n;
    return true;
  }
  bool append_zeros(size_t n) {
    static constexpr std::byte kZeros[4] = {};
    return append(kZeros, n);
  }
  template <typename T>
  bool append_value(T v) {
    return append(&v, sizeof v);
  }
  bool append_option(uint16_t code, std::string_view value) {
    return append_value(code) && append_value(static_cast<uint16_t>(value.size())) &&
           append(value.data(), value.size()) && append_zeros(pad4(value.size()) - value.size());
  }

  // Headers are written in host byte order; both formats record which one that is.
  bool write_header(LinkType link) {
    uint32_t link_type = link_to_file(link);
    if (format == CaptureFormat::kPcap) {
      return append_value(kPcapMagicNs) && append_value(uint16_t{2}) && append_value(uint16_t{4}) &&
             append_value(int32_t{0}) && append_value(uint32_t{0}) && append_value(snaplen) &&
             append_value(link_type);
    }
    static constexpr std::string_view kUserAppl = "mrc_wire";
    uint32_t shb_len = static_cast<uint32_t>(kShbMinBytes + 4 + pad4(kUserAppl.size()) + 4);
    bool ok = append_value(kBlockShb) && append_value(shb_len) && append_value(kByteOrderMagic) &&
              append_value(uint16_t{1}) && append_value(uint16_t{0}) && append_value(int64_t{-1}) &&
              append_option(kOptShbUserAppl, kUserAppl) && append_value(uint32_t{0}) &&
              append_value(shb_len);
    // IDB: link type, reserved, snaplen, if_tsresol = 9 (ns), end of options.
    uint32_t idb_len = 20 + 8 + 4;
    const char tsresol[1] = {9};
    return ok && append_value(kBlockIdb) && append_value(idb_len) &&
           append_value(static_cast<uint16_t>(link_type)) && append_value(uint16_t{0}) &&
           append_value(snaplen) && append_option(kOptIfTsresol, std::string_view(tsresol, 1)) &&
           append_value(uint32_t{0}) && append_value(idb_len);
  }

  bool write_record(uint64_t ts_ns, Bytes data, uint32_t orig_len, std::string_view comment) {
    uint32_t caplen = static_cast<uint32_t>(std::min<size_t>(data.size(), snaplen));
    if (orig_len == 0) {
      orig_len = data.size() > std::numeric_limits<uint32_t>::max()
                     ? std::numeric_limits<uint32_t>::max()
                     : static_cast<uint32_t>(data.size());
    }
    if (orig_len < caplen) {
      return fail("orig_len " + std::to_string(orig_len) + " is smaller than the " +
                  std::to_string(caplen) + " captured bytes");
    }
    if (format == CaptureFormat::kPcap) {
      uint64_t sec = ts_ns / kNsPerSecond;
      if (sec > std::numeric_limits<uint32_t>::max()) {
        return fail("timestamp " + std::to_string(ts_ns) + " ns is beyond the pcap range");
      }
      uint32_t hdr[4] = {static_cast<uint32_t>(sec), static_cast<uint32_t>(ts_ns % kNsPerSecond),
                         caplen, orig_len};
      return append(hdr, sizeof hdr) && append(data.data(), caplen);
    }
    if (comment.size() > 0xFFFF) {
      return fail("comment of " + std::to_string(comment.size()) +
                  " bytes exceeds the pcapng option limit of 65535");
    }
    size_t opts = comment.empty() ? 0 : 4 + pad4(comment.size()) + 4;
    uint32_t len = static_cast<uint32_t>(kBlockMinBytes + 20 + pad4(caplen) + opts);
    uint32_t hdr[7] = {
        kBlockEpb, len,     0, static_cast<uint32_t>(ts_ns >> 32), static_cast<uint32_t>(ts_ns),
        caplen,    orig_len};
    bool ok = append(hdr, sizeof hdr) && append(data.data(), caplen) &&
              append_zeros(pad4(caplen) - caplen);
    if (ok && !comment.empty()) {
      ok = append_option(kOptComment, comment) && append_value(uint32_t{0});
    }
    return ok && append_value(len);
  }
};

CaptureWriter::CaptureWriter() : impl_(std::make_unique<Impl>()) {}
CaptureWriter::~CaptureWriter() = default;

bool CaptureWriter::open(const std::string& path, CaptureFormat format, LinkType link,
                         uint32_t snaplen) {
  Impl& d = *impl_;
  if (d.fd >= 0) {
    // Not fatal for the file already being written.
    d.error = d.path + ": open(" + path + ") while already open; close() first";
    return false;
  }
  d.path = path;
  d.tmp_path = path + ".tmp";
  d.format = format;
  d.failed = false;
  d.error.clear();
  if (snaplen == 0 || snaplen > kMaxRecordBytes) {
    return d.fail("snaplen " + std::to_string(snaplen) + " outside 1.." +
                  std::to_string(kMaxRecordBytes));
  }
  d.snaplen = snaplen;
  d.fd = ::open(d.tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (d.fd < 0) return d.fail_errno("cannot create " + d.tmp_path);
  d.buf.resize(kWriteBufferBytes);
  d.used = 0;
  if (!d.write_header(link)) {
    d.abandon();
    return false;
  }
  return true;
}

bool CaptureWriter::write(uint64_t ts_ns, Bytes data, uint32_t orig_len, std::string_view comment) {
  Impl& d = *impl_;
  if (d.failed) return false;
  if (d.fd < 0) return d.fail("write() on a writer that is not open");
  return d.write_record(ts_ns, data, orig_len, comment);
}

bool CaptureWriter::close() {
  Impl& d = *impl_;
  if (d.fd < 0) return d.failed ? false : d.fail("close() on a writer that is not open");
  if (d.failed || !d.flush()) {
    d.abandon();
    return false;
  }
  int fd = d.fd;
  d.fd = -1;
  if (::close(fd) != 0) {
    d.fail_errno("closing " + d.tmp_path + " failed");
    ::unlink(d.tmp_path.c_str());
    return false;
  }
  if (::rename(d.tmp_path.c_str(), d.path.c_str()) != 0) {
    d.fail_errno("renaming " + d.tmp_path + " failed");
    ::unlink(d.tmp_path.c_str());
    return false;
  }
  d.buf.clear();
  d.buf.shrink_to_fit();
  return true;
}

const std::string& CaptureWriter::error() const {
  return impl_->error;
}

}  // namespace mrc::wire
