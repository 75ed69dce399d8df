"""RunSettings and EncodeSettings (run/settings.py): checked when made, frozen, picklable, given
whole to Pipeline and Batch; and the one rule that picks the decoder."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

import streamconv
from streamconv.run.settings import (EncodeSettings, RunSettings, decoder_to_open, settings_from,
                                     sink_options_with)


@pytest.mark.parametrize("field, value, message", [
    ("ring", 0, "ring must be an integer from 1 to 64"),
    ("device", -1, "device must be an integer >= 0"),
    ("max_frames", True, "max_frames must be an integer"),
    ("border", "wrap", "unknown border mode"),
    ("kernel", "fastest", "unknown kernel"), ("colour", "gpu", "unknown colour path"),
    ("decoder", "vaapi", "unknown decoder")])
def test_a_setting_that_cannot_be_is_refused_when_made(field, value, message):
    with pytest.raises(streamconv.SettingsError, match=message):
        RunSettings(**{field: value})


def test_settings_are_frozen_and_travel_to_worker_processes_whole():
    settings = RunSettings(backend="cpu", ring=5, border="zero", depth=16, max_frames=7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.ring = 2  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(settings)) == settings
    assert settings.resolved() == settings  # cpu is cpu


@pytest.mark.parametrize("decoder, backend, hwaccel, segmented, opened", [
    ("auto", "cuda", False, False, "auto"), ("auto", "cpu", False, False, "cpu"),
    ("nvdec", "cpu", False, False, "nvdec"), ("auto", "cuda", True, False, "cpu"),
    ("nvdec", "cuda", True, False, "cpu"), ("auto", "cuda", False, True, "cpu"),
    ("nvdec", "cpu", False, True, "nvdec"), ("cpu", "cuda", False, False, "cpu")])
def test_the_one_rule_for_the_decoder(decoder, backend, hwaccel, segmented, opened):
    assert decoder_to_open(decoder, backend, hwaccel=hwaccel, segmented=segmented) == opened
    settings = RunSettings(decoder=decoder, backend="cpu")
    assert settings.decoder_to_open(segmented=segmented) == decoder_to_open(decoder, "cpu",
                                                                            segmented=segmented)


def test_settings_or_their_keywords_not_both():
    settings = RunSettings(backend="cpu", ring=2)
    assert settings_from(settings) is settings and \
        settings_from(None, ring=2, backend="cpu") == settings
    with pytest.raises(TypeError, match="not both"):
        settings_from(settings, ring=4)
    with pytest.raises(TypeError, match="not both"):
        streamconv.Pipeline("test:32x24,frames=1", settings=settings, border="zero")


def test_encode_settings_are_the_encoder_group():
    encode = EncodeSettings(codec="ffv1", crf=None)
    assert encode.sink_options() == {"codec": "ffv1"}
    assert sink_options_with(None, {"preset": "fast", "crf": None}) == {"preset": "fast"}
    assert sink_options_with(encode, {"muxer_options": {"k": "v"}}) == \
        {"codec": "ffv1", "muxer_options": {"k": "v"}}
    with pytest.raises(TypeError, match="not both"):
        sink_options_with(encode, {"codec": "ffv1"})


def test_a_pipeline_made_from_settings_runs_as_one_made_from_keywords(tmp_path):
    settings = RunSettings(backend="cpu", ring=2, border="replicate", max_frames=3)
    by_settings = streamconv.Pipeline("test:32x24,frames=9", ["box:size=3"], None,
                                      settings=settings)
    by_keywords = streamconv.Pipeline("test:32x24,frames=9", ["box:size=3"], None, backend="cpu",
                                      ring=2, border="replicate", max_frames=3)
    assert by_settings.settings == by_keywords.settings == settings
    assert by_settings.run().frames == by_keywords.run().frames == 3
