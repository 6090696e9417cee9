"""Counting checks for the Python tests run by ctest (tests/tests.cmake):
each failed check prints its description and is counted; summary() prints
`N passed, N failed` (the line ctest's output shows) and gives the exit
status. Import it from a test in tests/ (its directory is on sys.path when
the test runs as a script)."""


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def __call__(self, ok, what):
        """Count one check; print `FAIL: what` when ok is false. Returns ok."""
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL:", what)
        return ok

    def summary(self):
        """Print the counts; 1 when any check failed, else 0."""
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0
