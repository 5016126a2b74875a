// Private parts of mrc_scripts shared by the parser, the field table and the player.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conformance/scripts/scripts.h"

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

}  // namespace mrc::scripts
