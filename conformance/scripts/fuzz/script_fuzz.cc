// Fuzz target for the script parser (parse_script). Beyond "no crash, no sanitizer report" it
// checks what the parser promises: a refused script gets a position inside the text (line 1..
// number of lines + 1, column >= 1) and a message; an accepted one has statements whose
// positions are inside the text too, and a header within the documented ranges.
#include <cstdlib>
#include <string_view>

#include "conformance/scripts/scripts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t lines = 1;
  for (char c : text) lines += c == '\n';
  mrc::scripts::Script s;
  mrc::scripts::ParseError err;
  if (!mrc::scripts::parse_script(text, "fuzz.mrcs", s, err)) {
    if (err.message.empty() || err.pos.line < 1 || err.pos.line > lines + 1 || err.pos.column < 1 ||
        err.format().empty())
      std::abort();
    return 0;
  }
  if (s.setup.planes < 1 || s.setup.planes > 4) std::abort();
  for (const mrc::scripts::Statement& st : s.statements)
    if (st.pos.line < 1 || st.pos.line > lines || st.text.empty()) std::abort();
  return 0;
}
