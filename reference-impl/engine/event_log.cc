#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "reference-impl/engine/engine.h"

namespace mrc::engine {
namespace {

Event& add(Event& e, EventField f) {
  // Events are built by the engine with a fixed set of fields; extras are dropped rather than
  // allocating on the hot path.
  if (e.nfields < kMaxEventFields) e.fields[e.nfields++] = f;
  return e;
}

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    const auto uc = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (uc < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", uc);
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

}  // namespace

Event& Event::u(std::string_view key, uint64_t v) {
  EventField f;
  f.type = EventField::Type::kUint;
  f.key = key;
  f.u = v;
  return add(*this, f);
}
Event& Event::i(std::string_view key, int64_t v) {
  EventField f;
  f.type = EventField::Type::kInt;
  f.key = key;
  f.i = v;
  return add(*this, f);
}
Event& Event::d(std::string_view key, double v) {
  EventField f;
  f.type = EventField::Type::kDouble;
  f.key = key;
  f.d = v;
  return add(*this, f);
}
Event& Event::s(std::string_view key, std::string_view v) {
  EventField f;
  f.type = EventField::Type::kStr;
  f.key = key;
  f.s = v;
  return add(*this, f);
}

const EventField* Event::find(std::string_view key) const {
  for (uint8_t k = 0; k < nfields; ++k)
    if (fields[k].key == key) return &fields[k];
  return nullptr;
}

std::string_view event_kind_name(EventKind k) {
  switch (k) {
    case EventKind::kQpState:
      return "qp_state";
    case EventKind::kEvState:
      return "ev_state";
    case EventKind::kCwnd:
      return "cwnd";
    case EventKind::kRetransmit:
      return "retransmit";
    case EventKind::kCompletion:
      return "completion";
    case EventKind::kAsync:
      return "async";
    case EventKind::kDrop:
      return "drop";
    case EventKind::kNackRx:
      return "nack_rx";
    case EventKind::kProbe:
      return "probe";
    case EventKind::kPortStatus:
      return "port_status";
    case EventKind::kEpResponse:
      return "ep_response";
    case EventKind::kMpr:
      return "mpr";
    case EventKind::kReverseEv:
      return "reverse_ev";
  }
  return "unknown";
}

void append_event_json(std::string& out, const Event& e, std::string_view node) {
  char buf[64];
  out += "{\"t_ns\":";
  std::snprintf(buf, sizeof buf, "%" PRIu64, e.t_ns);
  out += buf;
  out += ",\"node\":";
  append_json_string(out, node);
  out += ",\"kind\":";
  append_json_string(out, event_kind_name(e.kind));
  out += ",\"qpn\":";
  std::snprintf(buf, sizeof buf, "%" PRIu32, e.qpn);
  out += buf;
  for (uint8_t k = 0; k < e.nfields; ++k) {
    const EventField& f = e.fields[k];
    out.push_back(',');
    append_json_string(out, f.key);
    out.push_back(':');
    switch (f.type) {
      case EventField::Type::kUint:
        std::snprintf(buf, sizeof buf, "%" PRIu64, f.u);
        out += buf;
        break;
      case EventField::Type::kInt:
        std::snprintf(buf, sizeof buf, "%" PRId64, f.i);
        out += buf;
        break;
      case EventField::Type::kDouble:
        if (std::isfinite(f.d)) {
          std::snprintf(buf, sizeof buf, "%.17g", f.d);
          out += buf;
        } else {
          out += "null";  // JSON has no NaN/Inf
        }
        break;
      case EventField::Type::kStr:
        append_json_string(out, f.s);
        break;
    }
  }
  out += "}\n";
}

}  // namespace mrc::engine
