// Tests of the pcap/pcapng reader and writer: round trips, both byte orders, a table of
// malformed files, truncation and corruption sweeps, and interop with libpcap and tshark.
#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "wire/samples.h"
#include "wire/wire.h"

namespace mrc::wire {
namespace {

namespace fs = std::filesystem;
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif
using ByteVec = std::vector<std::byte>;

constexpr uint32_t kMagicUs = 0xa1b2c3d4;
constexpr uint32_t kMagicNs = 0xa1b23c4d;
constexpr uint32_t kShb = 0x0A0D0D0A;
constexpr uint32_t kIdb = 1;
constexpr uint32_t kOpb = 2;
constexpr uint32_t kSpb = 3;
constexpr uint32_t kEpb = 6;
constexpr uint64_t kNs = 1'000'000'000;

// Builds capture bytes field by field in a chosen byte order.
class Builder {
 public:
  explicit Builder(bool big_endian = false) : big_(big_endian) {}
  Builder& u8(uint8_t v) {
    out_.push_back(std::byte{v});
    return *this;
  }
  Builder& u16(uint16_t v) { return uint(v, 2); }
  Builder& u32(uint32_t v) { return uint(v, 4); }
  Builder& u64(uint64_t v) { return uint(v, 8); }
  Builder& raw(const ByteVec& b) {
    out_.insert(out_.end(), b.begin(), b.end());
    return *this;
  }
  Builder& raw(std::string_view s) {
    for (char c : s) u8(static_cast<uint8_t>(c));
    return *this;
  }
  Builder& pad4() {
    while (out_.size() % 4 != 0) u8(0);
    return *this;
  }
  Builder& option(uint16_t code, std::string_view value) {
    return u16(code).u16(static_cast<uint16_t>(value.size())).raw(value).pad4();
  }
  const ByteVec& bytes() const { return out_; }

 private:
  Builder& uint(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) {
      int shift = big_ ? 8 * (n - 1 - i) : 8 * i;
      out_.push_back(static_cast<std::byte>((v >> shift) & 0xFF));
    }
    return *this;
  }
  bool big_;
  ByteVec out_;
};

ByteVec payload(size_t n, uint8_t seed) {
  ByteVec v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(seed + i * 7);
  return v;
}

ByteVec cat(std::initializer_list<ByteVec> parts) {
  ByteVec out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// --- pcap pieces ---
ByteVec pcap_header(bool big, uint32_t magic = kMagicUs, uint32_t link = 1, uint16_t major = 2) {
  return Builder(big).u32(magic).u16(major).u16(4).u32(0).u32(0).u32(65535).u32(link).bytes();
}
ByteVec pcap_record(bool big, uint32_t sec, uint32_t frac, const ByteVec& data,
                    uint32_t orig_len = 0) {
  return Builder(big)
      .u32(sec)
      .u32(frac)
      .u32(static_cast<uint32_t>(data.size()))
      .u32(orig_len != 0 ? orig_len : static_cast<uint32_t>(data.size()))
      .raw(data)
      .bytes();
}

// --- pcapng pieces ---
ByteVec block(bool big, uint32_t type, const ByteVec& body) {
  uint32_t len = static_cast<uint32_t>(12 + body.size());
  return Builder(big).u32(type).u32(len).raw(body).u32(len).bytes();
}
ByteVec shb(bool big, uint16_t major = 1) {
  Builder b(big);
  b.u32(0x1A2B3C4D).u16(major).u16(0).u64(~uint64_t{0});
  return block(big, kShb, b.bytes());
}
ByteVec idb(bool big, uint16_t link, uint32_t snaplen = 0, std::optional<uint8_t> tsresol = {},
            std::optional<int64_t> tsoffset = {}) {
  Builder b(big);
  b.u16(link).u16(0).u32(snaplen);
  if (tsresol) b.option(9, std::string(1, static_cast<char>(*tsresol)));
  if (tsoffset) b.u16(14).u16(8).u64(static_cast<uint64_t>(*tsoffset));
  if (tsresol || tsoffset) b.u32(0);
  return block(big, kIdb, b.bytes());
}
ByteVec epb(bool big, uint32_t iface, uint64_t ts, const ByteVec& data, uint32_t orig_len = 0,
            std::string_view comment = {}) {
  Builder b(big);
  b.u32(iface).u32(static_cast<uint32_t>(ts >> 32)).u32(static_cast<uint32_t>(ts));
  b.u32(static_cast<uint32_t>(data.size()))
      .u32(orig_len != 0 ? orig_len : static_cast<uint32_t>(data.size()));
  b.raw(data).pad4();
  if (!comment.empty()) b.option(1, comment).u32(0);
  return block(big, kEpb, b.bytes());
}
ByteVec spb(bool big, const ByteVec& data, uint32_t orig_len) {
  return block(big, kSpb, Builder(big).u32(orig_len).raw(data).pad4().bytes());
}

// One record as read, copied out of the reader's views.
struct Rec {
  uint64_t ts_ns = 0;
  uint32_t orig_len = 0;
  ByteVec data;
  LinkType link = LinkType::kEthernet;
  uint32_t interface_id = 0;
  std::string comment;
  bool operator==(const Rec&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Rec& r) {
  return os << "{ts_ns=" << r.ts_ns << " orig_len=" << r.orig_len << " caplen=" << r.data.size()
            << " link=" << static_cast<int>(r.link) << " if=" << r.interface_id << " comment=\""
            << r.comment << "\"}";
}

struct ReadResult {
  bool opened = false;
  bool pcapng = false;
  std::vector<Rec> recs;
  std::string error;
};

bool within(const void* p, size_t n, const std::byte* lo, size_t size) {
  auto* b = static_cast<const std::byte*>(p);
  return n == 0 || (b >= lo && b + n <= lo + size);
}

// Reads until next() returns false. When `lo` is given, every view must lie inside it.
ReadResult drain(CaptureReader& reader, bool opened, const std::byte* lo = nullptr,
                 size_t size = 0) {
  ReadResult r;
  r.opened = opened;
  r.pcapng = reader.is_pcapng();
  if (!opened) {
    r.error = reader.error();
    return r;
  }
  CaptureRecord rec;
  while (reader.next(rec)) {
    if (lo != nullptr) {
      EXPECT_TRUE(within(rec.data.data(), rec.data.size(), lo, size)) << "data view escapes";
      EXPECT_TRUE(within(rec.comment.data(), rec.comment.size(), lo, size)) << "comment escapes";
    }
    r.recs.push_back(Rec{rec.ts_ns, rec.orig_len, ByteVec(rec.data.begin(), rec.data.end()),
                         rec.link, rec.interface_id, std::string(rec.comment)});
  }
  r.error = reader.error();
  // Errors and EOF are sticky.
  EXPECT_FALSE(reader.next(rec));
  EXPECT_EQ(reader.error(), r.error);
  EXPECT_EQ(reader.records_read(), r.recs.size());
  return r;
}

ReadResult read_memory(const ByteVec& bytes) {
  // An exact-size heap copy, so that ASan reports any read past the end.
  std::unique_ptr<std::byte[]> copy(new std::byte[bytes.size()]);
  std::copy(bytes.begin(), bytes.end(), copy.get());
  CaptureReader reader;
  bool opened = reader.open_memory(Bytes(copy.get(), bytes.size()));
  return drain(reader, opened, copy.get(), bytes.size());
}

ReadResult read_file(const std::string& path) {
  CaptureReader reader;
  bool opened = reader.open(path);
  return drain(reader, opened);
}

// The bytes through a pipe, as `mrct check /dev/stdin` reads them. The error names the path,
// which differs.
ReadResult read_pipe(const ByteVec& bytes, std::string* path_out = nullptr) {
  samples::PipeFeed feed(bytes);
  if (path_out) *path_out = feed.path();
  CaptureReader reader;
  const bool opened = reader.open(feed.path());
  return drain(reader, opened);
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "mrc_capture_test.XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    if (p == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  fs::path dir_;
};

void write_bytes(const std::string& path, const ByteVec& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A representative set of records for round trips.
std::vector<Rec> sample_records(bool with_comments) {
  std::vector<Rec> recs;
  const uint64_t ts[] = {0,
                         1,
                         999'999'999,
                         1'000'000'000,
                         1'700'000'000'123'456'789,
                         1'700'000'000'123'456'790,
                         4'294'967'295ull * kNs + 999'999'999};
  const size_t sizes[] = {0, 1, 3, 60, 1500, 9000, 4};
  const char* comments[] = {
      "", "x", "abc", "abcd", "R7: PSN 0x000123 retransmitted twice", "", "\xce\xbcs and ns"};
  for (size_t i = 0; i < std::size(ts); ++i) {
    Rec r;
    r.ts_ns = ts[i];
    r.data = payload(sizes[i], static_cast<uint8_t>(i));
    r.orig_len =
        (i % 3 == 0) ? static_cast<uint32_t>(sizes[i] + 100) : static_cast<uint32_t>(sizes[i]);
    if (with_comments) r.comment = comments[i];
    recs.push_back(r);
  }
  return recs;
}

void write_capture(const std::string& path, CaptureFormat format, LinkType link,
                   const std::vector<Rec>& recs, bool pass_zero_orig_len) {
  CaptureWriter w;
  ASSERT_TRUE(w.open(path, format, link)) << w.error();
  for (const auto& r : recs) {
    uint32_t orig = r.orig_len;
    if (pass_zero_orig_len && orig == r.data.size()) orig = 0;
    ASSERT_TRUE(w.write(r.ts_ns, as_bytes(r.data), orig, r.comment)) << w.error();
  }
  ASSERT_TRUE(w.close()) << w.error();
}

// ---------------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------------
TEST(CaptureRoundTrip, PcapNanoseconds) {
  TempDir tmp;
  std::string path = tmp.path("rt.pcap");
  auto recs = sample_records(false);
  write_capture(path, CaptureFormat::kPcap, LinkType::kEthernet, recs, true);
  ReadResult r = read_file(path);
  ASSERT_TRUE(r.opened) << r.error;
  EXPECT_FALSE(r.pcapng);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.recs, recs);
}

TEST(CaptureRoundTrip, PcapngWithComments) {
  TempDir tmp;
  std::string path = tmp.path("rt.pcapng");
  auto recs = sample_records(true);
  // Timestamps beyond the pcap range are fine in pcapng.
  Rec far;
  far.ts_ns = std::numeric_limits<uint64_t>::max();
  far.data = payload(17, 9);
  far.orig_len = 17;
  far.comment = std::string(1000, 'c');
  recs.push_back(far);
  write_capture(path, CaptureFormat::kPcapng, LinkType::kEthernet, recs, true);
  ReadResult r = read_file(path);
  ASSERT_TRUE(r.opened) << r.error;
  EXPECT_TRUE(r.pcapng);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.recs, recs);
}

TEST(CaptureRoundTrip, RawIpLinkType) {
  TempDir tmp;
  for (CaptureFormat format : {CaptureFormat::kPcap, CaptureFormat::kPcapng}) {
    std::string path = tmp.path(format == CaptureFormat::kPcap ? "raw.pcap" : "raw.pcapng");
    auto recs = sample_records(false);
    for (auto& r : recs) r.link = LinkType::kRawIp;
    write_capture(path, format, LinkType::kRawIp, recs, false);
    ReadResult r = read_file(path);
    ASSERT_TRUE(r.opened) << r.error;
    EXPECT_EQ(r.recs, recs);
  }
}

TEST(CaptureRoundTrip, SnaplenCutsDataAndKeepsOrigLen) {
  TempDir tmp;
  for (CaptureFormat format : {CaptureFormat::kPcap, CaptureFormat::kPcapng}) {
    std::string path = tmp.path(format == CaptureFormat::kPcap ? "snap.pcap" : "snap.pcapng");
    CaptureWriter w;
    ASSERT_TRUE(w.open(path, format, LinkType::kEthernet, 64)) << w.error();
    ByteVec data = payload(100, 1);
    ASSERT_TRUE(w.write(5, as_bytes(data)));
    ASSERT_TRUE(w.close()) << w.error();
    ReadResult r = read_file(path);
    ASSERT_EQ(r.recs.size(), 1u) << r.error;
    EXPECT_EQ(r.recs[0].orig_len, 100u);
    EXPECT_EQ(r.recs[0].data, ByteVec(data.begin(), data.begin() + 64));
  }
}

// ---------------------------------------------------------------------------------------------
// Writer behaviour
// ---------------------------------------------------------------------------------------------
// The reader's resident memory follows its position, not the file: pages far behind are
// dropped as it goes, and a record kept from the start still reads the same bytes.
// A "Name:   N kB" line of /proc/self/status, in KiB.
size_t status_kib(const std::string& name) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(name + ":", 0) == 0) return std::stoul(line.substr(name.size() + 1));
  return 0;
}

TEST(CaptureReader, ResidentMemoryStaysBoundedAndOldRecordsStayValid) {
  TempDir tmp;
  const std::string path = tmp.path("big.pcap");
  const size_t kRecords = 96 * 1024, kBytes = 1024;  // 96 MiB of records
  {
    CaptureWriter w;
    ASSERT_TRUE(w.open(path, CaptureFormat::kPcap, LinkType::kEthernet)) << w.error();
    ByteVec rec(kBytes);
    for (size_t i = 0; i < kRecords; ++i) {
      for (size_t k = 0; k < kBytes; k += 8) rec[k] = static_cast<std::byte>(i + k);
      ASSERT_TRUE(w.write(i, as_bytes(rec))) << w.error();
    }
    ASSERT_TRUE(w.close()) << w.error();
  }
  CaptureReader r;
  ASSERT_TRUE(r.open(path)) << r.error();
  CaptureRecord first, rec;
  ASSERT_TRUE(r.next(first));
  const ByteVec first_copy(first.data.begin(), first.data.end());
  const size_t before_kib = status_kib("RssFile");
  size_t max_kib = before_kib, n = 1;
  while (r.next(rec)) {
    if (++n % 4096 == 0) max_kib = std::max(max_kib, status_kib("RssFile"));
  }
  EXPECT_EQ(r.error(), "");
  EXPECT_EQ(n, kRecords);
  // 32 MiB kept behind the reader and a 4 MiB window ahead, not the 97 MiB of the file.
  EXPECT_LT(max_kib - before_kib, size_t{48} << 10);
  EXPECT_TRUE(
      std::equal(first.data.begin(), first.data.end(), first_copy.begin(), first_copy.end()));
}

TEST(CaptureWriter, WritesTmpAndRenamesOnClose) {
  TempDir tmp;
  std::string path = tmp.path("out.pcapng");
  CaptureWriter w;
  ASSERT_TRUE(w.open(path, CaptureFormat::kPcapng));
  ByteVec data = payload(60, 3);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(w.write(i, as_bytes(data), 0, "c"));
  EXPECT_TRUE(fs::exists(path + ".tmp"));
  EXPECT_FALSE(fs::exists(path));
  // Buffered: nothing has reached the file yet, not even the header.
  EXPECT_EQ(fs::file_size(path + ".tmp"), 0u);
  ASSERT_TRUE(w.close()) << w.error();
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  ASSERT_TRUE(fs::exists(path));
  EXPECT_EQ(read_file(path).recs.size(), 10u);
}

TEST(CaptureWriter, BufferFlushesLargeVolumes) {
  TempDir tmp;
  std::string path = tmp.path("big.pcap");
  CaptureWriter w;
  ASSERT_TRUE(w.open(path, CaptureFormat::kPcap));
  // Larger than the write buffer in total, with records larger than the buffer mixed in.
  std::vector<Rec> recs;
  for (int i = 0; i < 300; ++i) {
    Rec r;
    r.ts_ns = static_cast<uint64_t>(i) * 1000;
    r.data = payload(i % 50 == 7 ? 200'000 : 1500 + i, static_cast<uint8_t>(i));
    r.orig_len = static_cast<uint32_t>(r.data.size());
    ASSERT_TRUE(w.write(r.ts_ns, as_bytes(r.data)));
    recs.push_back(std::move(r));
  }
  ASSERT_TRUE(w.close()) << w.error();
  ReadResult r = read_file(path);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.recs, recs);
}

TEST(CaptureWriter, DestructorWithoutCloseLeavesNoFile) {
  TempDir tmp;
  std::string path = tmp.path("abandoned.pcap");
  {
    CaptureWriter w;
    ASSERT_TRUE(w.open(path, CaptureFormat::kPcap));
    ByteVec data = payload(60, 3);
    ASSERT_TRUE(w.write(1, as_bytes(data)));
    EXPECT_TRUE(fs::exists(path + ".tmp"));
  }
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_FALSE(fs::exists(path));
}

TEST(CaptureWriter, ErrorsNameThePath) {
  TempDir tmp;
  std::string bad = tmp.path("no/such/dir/x.pcap");
  CaptureWriter w;
  EXPECT_FALSE(w.open(bad, CaptureFormat::kPcap));
  EXPECT_NE(w.error().find(bad), std::string::npos) << w.error();
  EXPECT_NE(w.error().find("No such file"), std::string::npos) << w.error();

  CaptureWriter not_open;
  ByteVec data = payload(10, 0);
  EXPECT_FALSE(not_open.write(1, as_bytes(data)));
  EXPECT_NE(not_open.error().find("not open"), std::string::npos);

  EXPECT_FALSE(w.open(tmp.path("zero.pcap"), CaptureFormat::kPcap, LinkType::kEthernet, 0));
  EXPECT_NE(w.error().find("snaplen 0"), std::string::npos) << w.error();
}

TEST(CaptureWriter, RejectsBadRecordsAndLeavesNoFile) {
  TempDir tmp;
  ByteVec data = payload(60, 0);
  struct Case {
    const char* name;
    CaptureFormat format;
    uint64_t ts_ns;
    uint32_t orig_len;
    std::string comment;
    const char* error;
  };
  const Case cases[] = {
      {"orig_small", CaptureFormat::kPcap, 1, 10, "", "orig_len 10 is smaller than the 60"},
      {"ts_range", CaptureFormat::kPcap, 4'294'967'296ull * kNs, 0, "", "beyond the pcap range"},
      {"comment_long", CaptureFormat::kPcapng, 1, 0, std::string(70000, 'x'),
       "comment of 70000 bytes exceeds"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::string path = tmp.path(std::string(c.name) + ".cap");
    CaptureWriter w;
    ASSERT_TRUE(w.open(path, c.format));
    ASSERT_TRUE(w.write(0, as_bytes(data)));
    EXPECT_FALSE(w.write(c.ts_ns, as_bytes(data), c.orig_len, c.comment));
    EXPECT_NE(w.error().find(c.error), std::string::npos) << w.error();
    EXPECT_EQ(w.error().rfind(path + ": ", 0), 0u) << w.error();
    // A writer that failed does not publish a partial capture.
    EXPECT_FALSE(w.close());
    EXPECT_FALSE(fs::exists(path));
    EXPECT_FALSE(fs::exists(path + ".tmp"));
  }
}

// ---------------------------------------------------------------------------------------------
// Reading hand-built files in both byte orders
// ---------------------------------------------------------------------------------------------
class CaptureByteOrder : public ::testing::TestWithParam<bool> {};

TEST_P(CaptureByteOrder, PcapMicroAndNanoseconds) {
  bool big = GetParam();
  ByteVec a = payload(60, 1), b = payload(33, 2);
  for (uint32_t magic : {kMagicUs, kMagicNs}) {
    SCOPED_TRACE(magic == kMagicUs ? "us" : "ns");
    ByteVec file =
        cat({pcap_header(big, magic, 1), pcap_record(big, 1'700'000'000, 123456, a, 1514),
             pcap_record(big, 5, 999999, b)});
    ReadResult r = read_memory(file);
    ASSERT_TRUE(r.opened) << r.error;
    ASSERT_EQ(r.recs.size(), 2u) << r.error;
    EXPECT_EQ(r.error, "");
    uint64_t unit = magic == kMagicUs ? 1000 : 1;
    EXPECT_EQ(r.recs[0],
              (Rec{1'700'000'000 * kNs + 123456 * unit, 1514, a, LinkType::kEthernet, 0, ""}));
    EXPECT_EQ(r.recs[1], (Rec{5 * kNs + 999999 * unit, 33, b, LinkType::kEthernet, 0, ""}));
  }
  for (uint32_t link : {101u, 228u, 229u}) {
    ReadResult r = read_memory(cat({pcap_header(big, kMagicNs, link), pcap_record(big, 1, 2, a)}));
    ASSERT_EQ(r.recs.size(), 1u) << r.error;
    EXPECT_EQ(r.recs[0].link, LinkType::kRawIp);
  }
}

TEST_P(CaptureByteOrder, PcapngBlocksAndResolutions) {
  bool big = GetParam();
  ByteVec a = payload(60, 1), b = payload(1, 2), c = payload(7, 3);
  ByteVec file = cat({
      shb(big), idb(big, 1, 0),                           // 0: default resolution, microseconds
      idb(big, 228, 0, 3),                                // 1: milliseconds, raw IPv4
      idb(big, 229, 0, 0x80 | 10),                        // 2: 2^-10 s, raw IPv6
      idb(big, 1, 0, 12, -1000),                          // 3: picoseconds, offset -1000 s
      idb(big, 101, 0, 9, 7),                             // 4: nanoseconds, offset +7 s
      block(big, 4, Builder(big).u16(0).u16(0).bytes()),  // name resolution: skipped
      epb(big, 0, 1'700'000'000'123'456ull, a, 0, "first"),
      block(big, 0x40000BAD, payload(20, 0)),  // custom block: skipped
      epb(big, 1, 1'700'000'000'123ull, b, 1000), epb(big, 2, 3 * 1024 + 512, c),
      epb(big, 3, 1'001'000'000'000'001ull, a, 0, "pico"), epb(big, 4, 42, b),
      block(big, 5, Builder(big).u32(0).u32(0).u32(0).bytes()),  // statistics: skipped
  });
  ReadResult r = read_memory(file);
  ASSERT_TRUE(r.opened) << r.error;
  EXPECT_TRUE(r.pcapng);
  EXPECT_EQ(r.error, "");
  std::vector<Rec> want = {
      {1'700'000'000'123'456'000ull, 60, a, LinkType::kEthernet, 0, "first"},
      {1'700'000'000'123'000'000ull, 1000, b, LinkType::kRawIp, 1, ""},
      {3'500'000'000ull, 7, c, LinkType::kRawIp, 2, ""},
      {1'000'000'000ull, 60, a, LinkType::kEthernet, 3, "pico"},  // 1001 s - 1000 s, ps dropped
      {7 * kNs + 42, 1, b, LinkType::kRawIp, 4, ""},
  };
  EXPECT_EQ(r.recs, want);
}

TEST_P(CaptureByteOrder, PcapngSectionsSpbAndObsoleteBlock) {
  bool big = GetParam();
  ByteVec a = payload(60, 1), b = payload(10, 2);
  // Obsolete packet block: u16 interface, u16 drops, ts, caplen, len, data, options.
  Builder opb(big);
  opb.u16(0).u16(0).u32(0).u32(77).u32(10).u32(10).raw(b).pad4().option(1, "old").u32(0);
  ByteVec file = cat({
      shb(big),
      idb(big, 1, 0, 9),
      epb(big, 0, 11, a),
      spb(big, a, 1514),  // caplen is min(orig_len, block room)
      // A second section in the other byte order: the interface list starts over.
      shb(!big),
      idb(!big, 101, 8),  // snaplen 8 bounds the SPB data
      idb(!big, 1, 0, 6),
      spb(!big, b, 10),
      epb(!big, 1, 12, b, 0, "second section"),
      // A third section, back in the first order, with an obsolete packet block.
      shb(big),
      idb(big, 1, 0, 9),
      block(big, kOpb, opb.bytes()),
  });
  ReadResult r = read_memory(file);
  ASSERT_TRUE(r.opened) << r.error;
  EXPECT_EQ(r.error, "");
  std::vector<Rec> want = {
      {11, 60, a, LinkType::kEthernet, 0, ""},
      {0, 1514, a, LinkType::kEthernet, 0, ""},
      {0, 10, ByteVec(b.begin(), b.begin() + 8), LinkType::kRawIp, 0, ""},
      {12'000, 10, b, LinkType::kEthernet, 1, "second section"},
      {77, 10, b, LinkType::kEthernet, 0, "old"},
  };
  EXPECT_EQ(r.recs, want);
}

INSTANTIATE_TEST_SUITE_P(Capture, CaptureByteOrder, ::testing::Values(false, true),
                         [](const auto& row) { return row.param ? "Big" : "Little"; });

TEST(CaptureReader, HeaderOnlyFilesAreEmptyNotErrors) {
  for (const ByteVec& file : {pcap_header(false), pcap_header(true, kMagicNs), shb(false),
                              cat({shb(true), idb(true, 1)})}) {
    ReadResult r = read_memory(file);
    EXPECT_TRUE(r.opened) << r.error;
    EXPECT_TRUE(r.recs.empty());
    EXPECT_EQ(r.error, "");
  }
}

TEST(CaptureReader, FileErrorsNameThePath) {
  TempDir tmp;
  std::string empty = tmp.path("empty.pcap");
  write_bytes(empty, {});
  ReadResult r = read_file(empty);
  EXPECT_FALSE(r.opened);
  EXPECT_EQ(r.error, empty + ": empty file, no pcap or pcapng header at byte 0");

  std::string cut = tmp.path("cut.pcap");
  write_bytes(cut, cat({pcap_header(false), pcap_record(false, 1, 2, payload(60, 0))}));
  fs::resize_file(cut, 24 + 7);
  r = read_file(cut);
  EXPECT_TRUE(r.opened);
  EXPECT_EQ(r.error, cut + ": truncated record header at byte 24 (need 16 bytes, have 7)");

  std::string missing = tmp.path("missing.pcap");
  r = read_file(missing);
  EXPECT_FALSE(r.opened);
  EXPECT_EQ(r.error, missing + ": cannot open: No such file or directory");
}

TEST(CaptureReader, ReadsFromAPipe) {
  TempDir tmp;
  std::string fifo = tmp.path("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ByteVec file = cat({pcap_header(false, kMagicNs), pcap_record(false, 1, 2, payload(60, 0))});
  // The writer blocks until the reader opens the FIFO; a child process keeps this simple.
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    write_bytes(fifo, file);
    _exit(0);
  }
  ReadResult r = read_file(fifo);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_EQ(r.recs.size(), 1u) << r.error;
  EXPECT_EQ(r.recs[0].ts_ns, kNs + 2);
}

TEST(CaptureReader, ReopenResetsState) {
  CaptureReader reader;
  ByteVec bad = cat({shb(false), epb(false, 0, 1, payload(4, 0))});
  ByteVec good = cat({pcap_header(true), pcap_record(true, 1, 1, payload(4, 0))});
  ASSERT_TRUE(reader.open_memory(as_bytes(bad)));
  CaptureRecord rec;
  EXPECT_FALSE(reader.next(rec));
  EXPECT_NE(reader.error(), "");
  ASSERT_TRUE(reader.open_memory(as_bytes(good)));
  EXPECT_EQ(reader.error(), "");
  EXPECT_FALSE(reader.is_pcapng());
  EXPECT_TRUE(reader.next(rec));
  EXPECT_EQ(reader.records_read(), 1u);
}

// ---------------------------------------------------------------------------------------------
// Malformed files: one row per way a capture can be broken
// ---------------------------------------------------------------------------------------------
struct MalformedCase {
  std::string name;
  ByteVec bytes;
  std::string error;      // expected substring, after "<memory>: "
  size_t records_before;  // good records returned before the error
};
std::ostream& operator<<(std::ostream& os, const MalformedCase& c) {
  return os << c.name;
}

ByteVec with_u32(ByteVec v, size_t at, uint32_t value) {
  for (int i = 0; i < 4; ++i) v[at + i] = static_cast<std::byte>(value >> (8 * i));
  return v;
}

std::vector<MalformedCase> malformed_cases() {
  const ByteVec pkt = payload(60, 5);
  const ByteVec hdr = pcap_header(false);
  const ByteVec sec = shb(false);     // 28 bytes
  const ByteVec eth = idb(false, 1);  // 20 bytes, at byte 28
  const ByteVec rec_hdr_only = Builder().u32(1).u32(2).u32(100).u32(100).bytes();
  // EPB whose option claims 20 bytes but the block ends 4 bytes later.
  const ByteVec epb_cut_opt = block(false, kEpb,
                                    Builder()
                                        .u32(0)
                                        .u32(0)
                                        .u32(1)
                                        .u32(4)
                                        .u32(4)
                                        .raw(payload(4, 0))
                                        .u16(1)
                                        .u16(20)
                                        .u32(0)
                                        .bytes());
  // IDB whose option claims 8 bytes of value at the very end of the block.
  const ByteVec idb_cut_opt =
      block(false, kIdb, Builder().u16(1).u16(0).u32(0).u16(9).u16(8).bytes());
  ByteVec two_records_cut =
      cat({hdr, pcap_record(false, 1, 2, pkt), pcap_record(false, 1, 3, pkt)});
  two_records_cut.pop_back();
  return {
      {"EmptyFile", {}, "empty file, no pcap or pcapng header at byte 0", 0},
      {"ShortMagic", ByteVec(2, std::byte{0xd4}),
       "truncated file header at byte 0 (need 4 bytes, have 2)", 0},
      {"ShortGlobalHeader", ByteVec(hdr.begin(), hdr.begin() + 10),
       "truncated pcap global header at byte 0 (need 24 bytes, have 10)", 0},
      {"BadMagic", with_u32(hdr, 0, 0x12345678), "bad magic 0x12345678 at byte 0", 0},
      {"PcapVersion", pcap_header(false, kMagicUs, 1, 1), "unsupported pcap version 1.4 at byte 4",
       0},
      {"PcapLinkType", pcap_header(true, kMagicUs, 113),
       "unsupported link type 113 at byte 20 (supported: 1 Ethernet, 101/228/229 raw IP)", 0},
      {"TruncatedRecordHeader", cat({hdr, ByteVec(7)}),
       "truncated record header at byte 24 (need 16 bytes, have 7)", 0},
      {"TruncatedRecordData", cat({hdr, rec_hdr_only, ByteVec(20)}),
       "truncated record data at byte 40 (need 100 bytes, have 20)", 0},
      {"CaplenTooLarge", cat({hdr, with_u32(rec_hdr_only, 8, 4'000'000'000u), ByteVec(64)}),
       "caplen 4000000000 exceeds limit 268435456 at byte 32", 0},
      {"SecondRecordTruncated", two_records_cut,
       "truncated record data at byte 116 (need 60 bytes, have 59)", 1},
      {"PcapngShortSectionHeader", ByteVec(sec.begin(), sec.begin() + 8),
       "truncated pcapng section header at byte 0", 0},
      {"PcapngByteOrderMagic", with_u32(sec, 8, 0x11223344),
       "bad pcapng byte-order magic 0x11223344 at byte 8", 0},
      {"PcapngSectionTooShort", with_u32(with_u32(sec, 4, 12), 24, 12),
       "pcapng block length 12 is below the minimum 28 at byte 0", 0},
      {"PcapngVersion", shb(false, 2), "unsupported pcapng version 2.0 at byte 12", 0},
      {"PcapngTruncatedBlockHeader", cat({sec, ByteVec(4)}),
       "truncated pcapng block header at byte 28 (need 8 bytes, have 4)", 0},
      {"PcapngBlockLengthTooSmall", cat({sec, Builder().u32(kIdb).u32(8).u32(8).bytes()}),
       "pcapng block length 8 is below the minimum 12 at byte 28", 0},
      {"PcapngBlockLengthNotMultipleOf4",
       cat({sec, Builder().u32(kIdb).u32(13).u32(0).u32(13).bytes()}),
       "pcapng block length 13 is not a multiple of 4 at byte 28", 0},
      {"PcapngBlockBeyondFile", cat({sec, Builder().u32(kIdb).u32(100).u32(0).u32(100).bytes()}),
       "truncated pcapng block at byte 28 (block type 0x00000001 length 100, have 16 bytes)", 0},
      {"PcapngTrailerMismatch", with_u32(cat({sec, eth}), 44, 24),
       "block trailer length mismatch at byte 44 (header says 20, trailer says 24)", 0},
      {"EpbBeforeIdb", cat({sec, epb(false, 0, 1, pkt)}),
       "EPB references unknown interface 0 at byte 28 (section has 0 interface(s))", 0},
      {"EpbUnknownInterface", cat({sec, eth, epb(false, 0, 1, pkt), epb(false, 3, 1, pkt)}),
       "EPB references unknown interface 3 at byte 140 (section has 1 interface(s))", 1},
      {"NewSectionForgetsInterfaces", cat({sec, eth, sec, epb(false, 0, 1, pkt)}),
       "EPB references unknown interface 0 at byte 76", 0},
      {"SpbWithoutIdb", cat({sec, spb(false, pkt, 60)}), "SPB references unknown interface 0", 0},
      {"PcapngLinkType", cat({sec, idb(false, 113), epb(false, 0, 1, pkt)}),
       "unsupported link type 113 on interface 0 at byte 48 (interface declared at byte 28", 0},
      {"EpbTruncatedOptionList", cat({sec, eth, epb_cut_opt}),
       "truncated option list in EPB at byte 80 (option 1 of length 20: need 20 bytes, have 4)", 0},
      {"IdbTruncatedOptionList", cat({sec, idb_cut_opt}),
       "truncated option list in IDB at byte 44 (option 9 of length 8: need 8 bytes, have 0)", 0},
      {"EpbCaplenBeyondBlock", cat({sec, eth, with_u32(epb(false, 0, 1, pkt), 20, 100)}),
       "EPB caplen 100 exceeds its block at byte 48 (packet data need 100 bytes, have 60)", 0},
      {"EpbCaplenTooLarge", cat({sec, eth, with_u32(epb(false, 0, 1, pkt), 20, 4'000'000'000u)}),
       "caplen 4000000000 exceeds limit 268435456 at byte 68", 0},
      {"EpbTooShort", cat({sec, eth, block(false, kEpb, ByteVec(16))}),
       "EPB too short at byte 48 (block body need 20 bytes, have 16)", 0},
      {"IdbTooShort", cat({sec, block(false, kIdb, ByteVec(4))}),
       "IDB too short at byte 28 (block body need 8 bytes, have 4)", 0},
      {"TsresolBadLength",
       cat({sec,
            block(false, kIdb, Builder().u16(1).u16(0).u32(0).option(9, "ab").u32(0).bytes())}),
       "if_tsresol option has length 2 at byte 44 (expected 1)", 0},
      {"TsresolOutOfRange", cat({sec, idb(false, 1, 0, 20)}), "unsupported if_tsresol 10^-20", 0},
      {"TimestampOverflow", cat({sec, idb(false, 1, 0, 0), epb(false, 0, uint64_t{1} << 63, pkt)}),
       "EPB timestamp 9223372036854775808 does not fit in 64-bit nanoseconds at byte 60", 0},
      {"NegativeTimestamp", cat({sec, idb(false, 1, 0, 9, -5), epb(false, 0, 1, pkt)}),
       "does not fit in 64-bit nanoseconds", 0},
  };
}

class CaptureMalformed : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(CaptureMalformed, ReportsClearError) {
  const MalformedCase& c = GetParam();
  ReadResult r = read_memory(c.bytes);
  EXPECT_EQ(r.recs.size(), c.records_before);
  ASSERT_NE(r.error, "") << "no error for a malformed file";
  EXPECT_EQ(r.error.rfind("<memory>: ", 0), 0u) << r.error;
  EXPECT_NE(r.error.find(c.error), std::string::npos)
      << "error:    " << r.error << "\nexpected: " << c.error;
  EXPECT_NE(r.error.find(" at byte "), std::string::npos) << r.error;
}

TEST_P(CaptureMalformed, SameErrorFromAFile) {
  const MalformedCase& c = GetParam();
  TempDir tmp;
  std::string path = tmp.path("bad.cap");
  write_bytes(path, c.bytes);
  ReadResult r = read_file(path);
  EXPECT_EQ(r.recs.size(), c.records_before);
  EXPECT_EQ(r.error.rfind(path + ": ", 0), 0u) << r.error;
  EXPECT_NE(r.error.find(c.error), std::string::npos) << r.error;
}

TEST_P(CaptureMalformed, SameErrorFromAPipe) {
  const MalformedCase& c = GetParam();
  std::string path;
  ReadResult r = read_pipe(c.bytes, &path);
  ReadResult m = read_memory(c.bytes);
  EXPECT_EQ(r.recs, m.recs);
  EXPECT_EQ(r.error.rfind(path + ": ", 0), 0u) << r.error;
  // The same message, at the same byte.
  EXPECT_EQ(r.error.substr(path.size()), m.error.substr(std::string("<memory>").size()));
}

INSTANTIATE_TEST_SUITE_P(Capture, CaptureMalformed, ::testing::ValuesIn(malformed_cases()),
                         [](const auto& row) { return row.param.name; });

// ---------------------------------------------------------------------------------------------
// Truncation and corruption sweeps
// ---------------------------------------------------------------------------------------------
// A capture with its block/record boundaries: cutting it at a boundary is a clean shorter file,
// cutting it anywhere else must be reported.
struct Layout {
  ByteVec bytes;
  std::vector<std::pair<size_t, size_t>> boundaries;  // (offset, records before it)
  void add(const ByteVec& piece, size_t records) {
    bytes.insert(bytes.end(), piece.begin(), piece.end());
    size_t before = boundaries.empty() ? 0 : boundaries.back().second;
    boundaries.push_back({bytes.size(), before + records});
  }
};

std::vector<Layout> sweep_layouts() {
  std::vector<Layout> out;
  for (bool big : {false, true}) {
    Layout pcap;
    pcap.add(pcap_header(big, kMagicNs), 0);
    for (int i = 0; i < 4; ++i) pcap.add(pcap_record(big, i, i, payload(13 * i, 1)), 1);
    out.push_back(pcap);

    Layout ng;
    ng.add(shb(big), 0);
    ng.add(idb(big, 1, 0, 9, 3), 0);
    ng.add(epb(big, 0, 5, payload(61, 1), 0, "one"), 1);
    ng.add(spb(big, payload(9, 2), 9), 1);
    ng.add(block(big, 4, payload(8, 0)), 0);
    ng.add(shb(!big), 0);
    ng.add(idb(!big, 229, 0, 0x80 | 20), 0);
    ng.add(epb(!big, 0, 5, payload(3, 1), 10, "two"), 1);
    out.push_back(ng);
  }
  return out;
}

TEST(CaptureSweep, EveryTruncationIsCleanAtBoundariesAndAnErrorElsewhere) {
  for (const Layout& layout : sweep_layouts()) {
    for (size_t len = 0; len <= layout.bytes.size(); ++len) {
      SCOPED_TRACE("length " + std::to_string(len));
      ByteVec cut(layout.bytes.begin(), layout.bytes.begin() + len);
      ReadResult r = read_memory(cut);
      std::optional<size_t> records_at;
      for (auto [off, n] : layout.boundaries) {
        if (off == len) records_at = n;
      }
      if (records_at) {
        EXPECT_EQ(r.error, "");
        EXPECT_EQ(r.recs.size(), *records_at);
      } else {
        EXPECT_NE(r.error, "");
        EXPECT_NE(r.error.find(" at byte "), std::string::npos) << r.error;
      }
    }
  }
}

TEST(CaptureSweep, APipeReadsEveryTruncationAsMemoryDoes) {
  for (const Layout& layout : sweep_layouts()) {
    for (size_t len = 0; len <= layout.bytes.size(); ++len) {
      SCOPED_TRACE("length " + std::to_string(len));
      ByteVec cut(layout.bytes.begin(), layout.bytes.begin() + len);
      std::string path;
      ReadResult p = read_pipe(cut, &path);
      ReadResult m = read_memory(cut);
      EXPECT_EQ(p.recs, m.recs);
      EXPECT_EQ(p.error.empty(), m.error.empty());
      if (!m.error.empty()) {
        EXPECT_EQ(p.error.substr(path.size()), m.error.substr(std::string("<memory>").size()));
      }
    }
  }
}

// A long stream: records of every size cross the reader's chunks, the record read before stays
// valid through the next call, and the reader holds a few chunks, not the stream.
TEST(CaptureReader, APipeIsReadAsItComesInBoundedMemory) {
  for (const bool ng : {false, true}) {
    SCOPED_TRACE(ng ? "pcapng" : "pcap");
    ByteVec bytes = ng ? cat({shb(false), idb(false, 1, 0, 9, 0)}) : pcap_header(false, kMagicNs);
    std::vector<ByteVec> payloads;
    size_t total = 0;
    for (uint32_t i = 0; total < (size_t{48} << 20); ++i) {
      // Mostly small records, now and then one of 200 KiB to 1.5 MiB.
      const size_t n = i % 97 == 0 ? (200u << 10) + (i * 7919u) % (1300u << 10) : 40 + i % 1500;
      payloads.push_back(payload(n, static_cast<uint8_t>(i)));
      const ByteVec rec =
          ng ? epb(false, 0, i, payloads.back()) : pcap_record(false, i, 0, payloads.back());
      bytes.insert(bytes.end(), rec.begin(), rec.end());
      total += n;
    }
    samples::PipeFeed feed(bytes);
    const size_t before = status_kib("RssAnon");
    size_t peak = before;
    {
      CaptureReader r;
      ASSERT_TRUE(r.open(feed.path())) << r.error();
      CaptureRecord prev, rec;
      bool have_prev = false;
      size_t i = 0;
      while (r.next(rec)) {
        ASSERT_LT(i, payloads.size());
        ASSERT_TRUE(
            std::equal(rec.data.begin(), rec.data.end(), payloads[i].begin(), payloads[i].end()))
            << "record " << i;
        if (have_prev) {
          ASSERT_TRUE(std::equal(prev.data.begin(), prev.data.end(), payloads[i - 1].begin(),
                                 payloads[i - 1].end()))
              << "record " << i - 1 << " after reading " << i;
        }
        prev = rec;
        have_prev = true;
        ++i;
        if (i % 1024 == 0) peak = std::max(peak, status_kib("RssAnon"));
      }
      EXPECT_EQ(r.error(), "");
      EXPECT_EQ(i, payloads.size());
    }
    // Two chunks of 4 MiB (one of them up to a record larger than that), not the 48 MiB stream.
    // ASan holds freed chunks in its quarantine, so there the figure says nothing.
    if (!kAddressSanitizer) {
      EXPECT_LT(peak - before, size_t{16} << 10);
    }
  }
}

// Deep into a stream (past its first chunks), errors still name bytes of the whole input: the
// failing record's and the interface's that it refers to.
TEST(CaptureReader, APipeNamesOffsetsInTheWholeInput) {
  ByteVec bytes = cat({shb(false), idb(false, 1)});
  for (int i = 0; i < 6000; ++i) {
    const ByteVec rec =
        epb(false, 0, static_cast<uint64_t>(i), payload(1000, static_cast<uint8_t>(i)));
    bytes.insert(bytes.end(), rec.begin(), rec.end());
  }
  const ByteVec tail = cat({idb(false, 105), epb(false, 1, 1, payload(60, 0))});
  bytes.insert(bytes.end(), tail.begin(), tail.end());
  std::string path;
  const ReadResult p = read_pipe(bytes, &path);
  const ReadResult m = read_memory(bytes);
  EXPECT_EQ(p.recs.size(), 6000u);
  ASSERT_NE(m.error.find("interface declared at byte"), std::string::npos) << m.error;
  EXPECT_EQ(p.error.substr(path.size()), m.error.substr(std::string("<memory>").size()));
}

TEST(CaptureSweep, RandomCorruptionNeverEscapesTheBuffer) {
  std::mt19937 rng(20240611);
  for (const Layout& layout : sweep_layouts()) {
    for (int iter = 0; iter < 3000; ++iter) {
      ByteVec bytes = layout.bytes;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < flips; ++i) {
        size_t at = rng() % bytes.size();
        // Mostly bit flips; sometimes a large value where a length was.
        bytes[at] = (rng() % 4 == 0) ? std::byte{0xFF} : bytes[at] ^ std::byte(1u << (rng() % 8));
      }
      ReadResult r = read_memory(bytes);  // views are checked inside
      if (!r.error.empty()) {
        EXPECT_EQ(r.error.rfind("<memory>: ", 0), 0u) << r.error;
      }
      // Every record consumes at least a 12-byte block or a 16-byte pcap header.
      EXPECT_LE(r.recs.size(), bytes.size() / 12);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Interop
// ---------------------------------------------------------------------------------------------
TEST(CaptureInterop, ReadsWhatLibpcapDumps) {
  TempDir tmp;
  struct Variant {
    const char* name;
    int dlt;
    u_int precision;
    LinkType link;
  };
  const Variant variants[] = {
      {"eth_us", DLT_EN10MB, PCAP_TSTAMP_PRECISION_MICRO, LinkType::kEthernet},
      {"eth_ns", DLT_EN10MB, PCAP_TSTAMP_PRECISION_NANO, LinkType::kEthernet},
      {"raw_ns", DLT_RAW, PCAP_TSTAMP_PRECISION_NANO, LinkType::kRawIp},
  };
  for (const auto& v : variants) {
    SCOPED_TRACE(v.name);
    std::string path = tmp.path(std::string(v.name) + ".pcap");
    pcap_t* p = pcap_open_dead_with_tstamp_precision(v.dlt, 65535, v.precision);
    ASSERT_NE(p, nullptr);
    pcap_dumper_t* d = pcap_dump_open(p, path.c_str());
    ASSERT_NE(d, nullptr) << pcap_geterr(p);
    bool nano = v.precision == PCAP_TSTAMP_PRECISION_NANO;
    std::vector<Rec> want;
    for (int i = 0; i < 5; ++i) {
      ByteVec data = payload(20 + 100 * i, static_cast<uint8_t>(i));
      pcap_pkthdr h{};
      h.ts.tv_sec = 1'700'000'000 + i;
      h.ts.tv_usec = nano ? 123'456'789 + i : 654'321 + i;  // tv_usec holds ns at nano precision
      h.caplen = static_cast<bpf_u_int32>(data.size());
      h.len = h.caplen + static_cast<bpf_u_int32>(i);
      pcap_dump(reinterpret_cast<u_char*>(d), &h, reinterpret_cast<const u_char*>(data.data()));
      uint64_t ts = static_cast<uint64_t>(h.ts.tv_sec) * kNs +
                    static_cast<uint64_t>(h.ts.tv_usec) * (nano ? 1 : 1000);
      want.push_back(Rec{ts, h.len, data, v.link, 0, ""});
    }
    pcap_dump_close(d);
    pcap_close(p);
    ReadResult r = read_file(path);
    ASSERT_TRUE(r.opened) << r.error;
    EXPECT_EQ(r.error, "");
    EXPECT_EQ(r.recs, want);
  }
}

TEST(CaptureInterop, LibpcapReadsWhatWeWrite) {
  TempDir tmp;
  for (CaptureFormat format : {CaptureFormat::kPcap, CaptureFormat::kPcapng}) {
    SCOPED_TRACE(format == CaptureFormat::kPcap ? "pcap" : "pcapng");
    std::string path = tmp.path(format == CaptureFormat::kPcap ? "ours.pcap" : "ours.pcapng");
    auto recs = sample_records(format == CaptureFormat::kPcapng);
    // libpcap reads the pcap seconds field as signed 32-bit; the format says unsigned.
    std::erase_if(recs, [](const Rec& r) { return r.ts_ns >= (uint64_t{1} << 31) * kNs; });
    ASSERT_GE(recs.size(), 5u);
    write_capture(path, format, LinkType::kEthernet, recs, true);
    char errbuf[PCAP_ERRBUF_SIZE];
    pcap_t* p =
        pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, errbuf);
    ASSERT_NE(p, nullptr) << errbuf;
    EXPECT_EQ(pcap_datalink(p), DLT_EN10MB);
    pcap_pkthdr* h;
    const u_char* data;
    size_t i = 0;
    while (pcap_next_ex(p, &h, &data) == 1) {
      ASSERT_LT(i, recs.size());
      uint64_t ts =
          static_cast<uint64_t>(h->ts.tv_sec) * kNs + static_cast<uint64_t>(h->ts.tv_usec);
      EXPECT_EQ(ts, recs[i].ts_ns) << "record " << i;
      EXPECT_EQ(h->len, recs[i].orig_len);
      EXPECT_EQ(ByteVec(reinterpret_cast<const std::byte*>(data),
                        reinterpret_cast<const std::byte*>(data) + h->caplen),
                recs[i].data);
      ++i;
    }
    EXPECT_EQ(i, recs.size());
    pcap_close(p);
  }
}

std::optional<std::string> find_on_path(const std::string& exe) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::string candidate = (fs::path(dir.empty() ? "." : dir) / exe).string();
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  *status = pclose(f);
  return out;
}

TEST(CaptureInterop, TsharkShowsCommentsAndNanosecondTimes) {
  auto tshark = find_on_path("tshark");
  if (!tshark) GTEST_SKIP() << "tshark is not on PATH";
  TempDir tmp;
  struct Frame {
    uint64_t ts_ns;
    std::string comment;
    const char* epoch;  // frame.time_epoch as tshark prints it
  };
  const Frame frames[] = {
      {1'700'000'000'123'456'789ull, "R12 violated: ICRC mismatch", "1700000000.123456789"},
      {1'700'000'000'123'456'790ull, "", "1700000000.123456790"},
      {1'700'000'001'000'000'001ull, "R3: PSN 0x000042 sent twice on EV 17",
       "1700000001.000000001"},
  };
  for (CaptureFormat format : {CaptureFormat::kPcapng, CaptureFormat::kPcap}) {
    bool ng = format == CaptureFormat::kPcapng;
    SCOPED_TRACE(ng ? "pcapng" : "pcap");
    std::string path = tmp.path(ng ? "annotated.pcapng" : "plain.pcap");
    CaptureWriter w;
    ASSERT_TRUE(w.open(path, format));
    ByteVec data = payload(60, 0);
    for (const auto& f : frames) ASSERT_TRUE(w.write(f.ts_ns, as_bytes(data), 0, f.comment));
    ASSERT_TRUE(w.close()) << w.error();

    int status = -1;
    std::string out = run(
        "'" + *tshark + "' -r '" + path + "' -T fields -e frame.comment -e frame.time_epoch 2>&1",
        &status);
    ASSERT_EQ(status, 0) << out;
    std::string expected;
    for (const auto& f : frames) {
      expected += (ng ? f.comment : std::string()) + "\t" + f.epoch + "\n";
    }
    // tshark may print a warning about running as root; keep only the field lines.
    std::string fields;
    std::stringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.find('\t') != std::string::npos) fields += line + "\n";
    }
    EXPECT_EQ(fields, expected) << "tshark output:\n" << out;
  }
}

}  // namespace
}  // namespace mrc::wire
