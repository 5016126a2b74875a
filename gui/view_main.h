// The viewer's entry point: `mrct-view ARGS` and `mrct view ARGS` both call view_main().
//
// Without --export (or --list) it opens the window; with --export it renders one view into a
// PNG/SVG without a display (QT_QPA_PLATFORM=offscreen unless the caller chose a platform),
// which is what `mrct run` uses for its summary. Exit codes follow mrct: 0 ok, 2 usage or
// unreadable input.
#pragma once

namespace mrc::view {

int view_main(int argc, char** argv);

}  // namespace mrc::view
