#include "conformance/report_text/report_text.h"

#include <gtest/gtest.h>

namespace mrc::report_text {
namespace {

TEST(ReportText, XmlEscapesMarkupAndDropsForbiddenControls) {
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(xml_escape(std::string("x\x01y\tz\n", 6)), "x y\tz\n");
  EXPECT_EQ(xml_escape(""), "");
}

TEST(ReportText, MarkdownCellIsOneLineWithEscapedPipes) {
  EXPECT_EQ(md_cell("a|b\nc\r\nd"), "a\\|b c  d");
}

}  // namespace
}  // namespace mrc::report_text
