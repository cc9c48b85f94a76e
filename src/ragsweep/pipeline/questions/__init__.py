"""``ragsweep-questions``: a question set generated from a dataset's documents, its evidence located
in the text as character spans, filtered with every drop counted (docs/questions.md).

* :mod:`ragsweep.corpus.sampling`: the windows of text the questions are asked about (seeded,
  stratified over documents and their sections or pages, independent of any chunking);
* :mod:`.prompts`: the templates of conf/questions/<name>.yaml filled in, the JSON schema, the parser;
* :mod:`.grounding`: evidence quotes located as spans; :mod:`.filters`: the checks;
* :mod:`.generate`: one set, start to end; :mod:`.output`: the file, the counts, MLflow;
* :mod:`.cli`: the command (a Hydra app over conf/questions.yaml); :mod:`.config`: its settings.
"""
