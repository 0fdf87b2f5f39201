"""Reports from the trace store: HTML, Markdown, JSON, JUnit XML and plots."""
