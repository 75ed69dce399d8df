"""Helpers the tests share, in one place: clips, the oracle, runs of the command, fakes and real
servers made for a test."""
