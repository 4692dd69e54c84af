"""Helpers only the tests and benches use: simulated recordings, tuner test joints, bag writers, files root
cannot write (`unwritable`)."""
