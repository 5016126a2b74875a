"""Runs root-only test modules; exits 77 (ctest SKIP_RETURN_CODE) when they cannot run here.

    /usr/bin/python3 testbed/tests/run_root.py test_fabric [test_cleanup ...]
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _util  # noqa: E402

SKIP = 77


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    reason = _util.root_skip_reason()
    if reason:
        print(f"SKIPPED: {reason}")
        return SKIP
    suite = unittest.defaultTestLoader.loadTestsFromNames(argv[1:])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
