"""Feeds for the pipeline: dataset readers, synthetic streams, the replay loop and the device fleet.

* :mod:`wevent.producers.tdrive`, :mod:`wevent.producers.foursquare`: read the original files into a
  :class:`wevent.core.data.UserValues` (slot x user matrix) with the papers' preprocessing
  (:mod:`wevent.producers.preprocess`), parsing with numpy (:mod:`wevent.producers.textio`);
* :mod:`wevent.producers.synthetic`: LNS / Sin / Log streams generated slot by slot;
* :mod:`wevent.producers.profiles`: the named settings of each feed, all overridable;
* :mod:`wevent.producers.replay`: the :class:`~wevent.producers.replay.Feed` and
  :class:`~wevent.producers.replay.SlotSink` interfaces, the replay loop and the dump sink;
* :mod:`wevent.producers.device_fleet`: the local model's device fleet (``wevent devices``): the users'
  ledgers and their perturbed answers to the server's requests;
* :mod:`wevent.producers.fixtures`: small sample files in the original formats and their generator.
"""
