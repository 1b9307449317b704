"""The reviewers' spec site (``python -m pullspec.conformance.docs build``, `conformance.docs.build`).

`build` (the commands), `hooks` (mkdocs hooks), `facts` (what the pages are generated from),
`render`, `extras`, `sources`, `pictures`, `diagrams` (the generated pages and pictures),
`coverage`, `rulebook`, `seeds` (facts gathered from the tests, the rulebooks and the seeds).
"""
