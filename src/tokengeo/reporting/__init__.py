"""A run's report.json, read and rendered: the one seam between judging and displaying.

:mod:`tokengeo.experiments` judges the claims and writes ``report.json``; everything a person
reads of a run is rendered from that file by this package, which imports no torch:

- :mod:`.reader`: the one validating reader (bounded, strict JSON, ``report.schema.json``);
- :mod:`.text`: numbers, intervals, verdict buckets, the tally and Markdown tables;
- :mod:`.document`: report.json as blocks (headings, paragraphs, tables, figures);
- :mod:`.render`: blocks as Markdown and as HTML (Jinja2, autoescaped); the figure policy;
- :mod:`.blocks`: the doc blocks' registry (name -> renderer);
- :mod:`.docfiles`: the doc-block parser and the safe rewrite of README.md and docs/.
"""
