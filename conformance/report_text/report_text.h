// Text escaping shared by every report writer of the suite (the checker's, the API suite's and
// the scripts' JUnit XML and Markdown), so that one rule decides what a report may contain.
#pragma once

#include <string>
#include <string_view>

namespace mrc::report_text {

// Text for an XML attribute value or element: & < > " ' as entities; the control characters
// XML 1.0 forbids (all below 0x20 but tab and newline) become spaces.
std::string xml_escape(std::string_view s);

// Text for one Markdown table cell: '|' escaped, newlines as spaces (a cell is one line).
std::string md_cell(std::string_view s);

}  // namespace mrc::report_text
