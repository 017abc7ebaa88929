"""The session in docs/python.md runs as shown (a doctest)."""

import doctest
import re

from conftest import REPO


def test_the_session_in_docs_python_md_runs_as_shown():
    text = (REPO / "docs" / "python.md").read_text()
    sessions = re.findall(r"```python\n(.*?)```", text, re.S)
    assert sessions, "docs/python.md has no ```python session"
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for k, session in enumerate(sessions):
        test = parser.get_doctest(session, {}, f"docs/python.md session {k + 1}", "docs/python.md", 0)
        assert test.examples, "a session without examples"
        result = runner.run(test)
        assert result.failed == 0, f"{result.failed} of {result.attempted} examples of docs/python.md differ (see above)"
