"""Feeds for the pipeline: dataset readers, synthetic streams, the replay loop and the device fleet.

* :mod:`producers.tdrive`, :mod:`producers.foursquare`: read the original files into a
  :class:`pipeline.core.data.UserValues` (slot x user matrix) with the papers' preprocessing
  (:mod:`producers.preprocess`), parsing with numpy (:mod:`producers.textio`);
* :mod:`producers.synthetic`: LNS / Sin / Log streams generated slot by slot;
* :mod:`producers.profiles`: the named settings of each feed, all overridable;
* :mod:`producers.replay`: the :class:`~producers.replay.Feed` and
  :class:`~producers.replay.SlotSink` interfaces, the replay loop and the dump sink;
* :mod:`producers.device_fleet`: the local model's device fleet (``wevent devices``): the users'
  ledgers and their perturbed answers to the server's requests;
* :mod:`producers.fixtures`: small sample files in the original formats and their generator.
"""
