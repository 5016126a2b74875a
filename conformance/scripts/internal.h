// Private parts of mrc_scripts shared by the parser, the field table and the player.
#pragma once

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conformance/scripts/scripts.h"
#include "reference-impl/engine/engine.h"

namespace mrc::scripts {

// Named constants usable in expressions (NACK codes, M values, WC statuses, ...).
std::optional<uint64_t> named_constant(std::string_view name);
std::string constant_names_hint();
std::optional<uint8_t> opcode_by_name(std::string_view name);
std::string opcode_names_hint();
std::string header_keys_hint();
std::string_view verb_name(Verb v);

bool known_field(Verb v, std::string_view name);
bool text_field(std::string_view name);  // value is text, not an expression (fill, payload, hex)
std::string fields_hint(Verb v);
bool is_send_flag(std::string_view s);
bool has_field(const Statement& st, std::string_view name);
bool parse_hex(std::string_view s, std::vector<std::byte>& out, std::string& why);
bool valid_fill(std::string_view s);
uint8_t fill_byte(std::string_view fill, size_t k);  // byte k of a fill pattern

// What a field of a received frame reads as, with the context decoding needs.
struct FrameCtx {
  wire::EvFormat format = wire::EvFormat::kStev;
  uint8_t plane = 1;
};
// Reads a field of a decoded frame; nullopt when the frame has no such header.
std::optional<uint64_t> get_field(std::string_view name, const wire::DecodedFrame& f,
                                  const FrameCtx& ctx);
bool psn_field(std::string_view name);  // arithmetic and ranges mod 2^24
bool ts_field(std::string_view name);   // 16-bit timestamps (ts16, ts_echo): mod 2^16

// Evaluates an expression with the current variables; false with `error` naming an unbound
// variable.
bool eval(const Expr& e, const std::map<std::string, uint64_t>& vars, bool psn, uint64_t& out,
          std::string& error);

// Builds the frame of a `send` statement. `values` holds every field already evaluated.
struct SendValues {
  std::vector<std::pair<std::string, uint64_t>> fields;  // in script order
  std::string fill;                                      // fill=...
  std::vector<std::byte> payload;                        // payload=HEX
  bool has_payload = false;
};
bool build_frame(const Statement& st, const SendValues& v, const Setup& setup, const Bindings& b,
                 std::vector<std::byte>& out, uint8_t& plane, std::string& error);

// The reference as the implementation: the same engine configuration and QP setup for the
// in-process target and for `mrct script serve` in a namespace, so a script sees the same
// implementation on both. The tester is node fd::1, MACs 02:00:00:00:01:PLANE; the
// implementation fd::2, 02:00:00:00:02:PLANE.
wire::Ipv6Addr gid(uint8_t node);
wire::MacAddr dut_mac(uint8_t plane);
wire::MacAddr tester_mac(uint8_t plane);
engine::EndpointConfig reference_config(const Setup& s, const wire::Ipv6Addr& dut_gid);
struct ReferenceQp {
  uint32_t cq = 0, qpn = 0;
  engine::MemoryRegion mr;
};
// Creates the CQ, QP (to RTS), memory region over `mem` (s.mr_bytes, filled with s.mr_fill) and
// receive WQEs the script's header describes.
bool setup_reference_qp(engine::Endpoint& ep, const Setup& s, runtime::Mutant mutant, void* mem,
                        ReferenceQp& q, std::string& error);
void bind_vars(const Setup& s, const ReferenceQp& q, Bindings& b);
std::vector<Completion> poll_reference_cq(engine::Endpoint& ep, uint32_t cq);
bool post_reference_write(engine::Endpoint& ep, uint32_t qpn,
                          std::deque<std::vector<std::byte>>& sources, uint64_t wr_id, uint32_t len,
                          std::optional<uint32_t> imm, uint64_t va, uint32_t rkey,
                          uint8_t fill_seed, std::string& error);

// `mrct script serve`: the reference implementation of a script's header in this process's
// network namespace, on the interfaces given, driven over stdin/stdout (netns.cc).
int serve_main(const std::string& script_path, const std::vector<std::string>& ifaces,
               runtime::Mutant mutant);
int serve_main(const Setup& s, const std::vector<std::string>& ifaces,
               const std::vector<wire::MacAddr>& next_hops, runtime::Mutant mutant);
// `mrct script serve --env`: the same, the header from the DUT contract's script-mode
// environment (MRC_SCRIPT_ROLE, MRC_IFACES, MRC_NEXT_HOPS, ... ci/dut/README.md).
int serve_env_main();

}  // namespace mrc::scripts
