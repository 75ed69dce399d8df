"""The input's tags, range tag and HDR metadata reach the output file (real clips, real runs):
stream languages, handler names and titles, the file's title, a limited range with the matrix
unspecified, the mastering display and content light level of HDR10 video."""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np
import pytest

from streamconv.io.ffmpeg.signalling import HdrMetadata, signalled_options

from helpers.cli import assert_ok

MASTER_DISPLAY = "G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(10000000,50)"


def write_tagged(path, codec="libx264", pix_fmt="yuv420p", *, video_tags=None, audio_tags=None,
                 file_tags=None,
                 colour=(1, 2, 2, 2), options=None, frames=4, sample_aspect_ratio=None):
    """A 64x48 clip of ``frames`` grey frames (and 0.1 s of silent AAC per frame with
    ``audio_tags``), its file and streams tagged, its colour (range, matrix, primaries, transfer)
    and its pixels' aspect ratio as given."""
    if codec not in av.codecs_available:
        pytest.skip(f"this PyAV build has no {codec}")
    deep = "10" in pix_fmt
    with av.open(str(path), "w") as container:
        container.metadata.update(file_tags or {})
        video = container.add_stream(codec, rate=25)
        video.width, video.height, video.pix_fmt = 64, 48, pix_fmt
        video.options = {"preset": "ultrafast", **(options or {})}
        context = video.codec_context
        context.color_range, context.colorspace, context.color_primaries, context.color_trc = colour
        if sample_aspect_ratio is not None:
            context.sample_aspect_ratio = sample_aspect_ratio
        video.metadata.update(video_tags or {})
        audio = None
        if audio_tags is not None:
            audio = container.add_stream("aac", rate=48000)
            audio.layout = "mono"
            audio.metadata.update(audio_tags)
        for index in range(frames):
            grey = np.full((48, 64, 3), 30 + 40 * index, np.uint16 if deep else np.uint8)
            frame = av.VideoFrame.from_ndarray(grey * 257 if deep else grey, format="rgb48le"
                                               if deep else "rgb24")
            frame.pts = index
            for packet in video.encode(frame):
                container.mux(packet)
            if audio is not None:
                sound = av.AudioFrame.from_ndarray(np.zeros((1, 4800), np.float32), format="fltp",
                                                   layout="mono")
                sound.sample_rate, sound.pts = 48000, index * 4800
                for packet in audio.encode(sound):
                    container.mux(packet)
        for stream in (video, audio):
            for packet in stream.encode(None) if stream is not None else ():
                container.mux(packet)
    return path


def run(cli, source, out, *extra):
    result = cli("run", str(source), "-o", str(out), "--backend", "cpu", "--filter", "box",
                 "--no-progress", *extra)
    assert_ok(result)
    return result


def tags(mapping) -> dict[str, str]:
    """Tags by lower-case name (Matroska's come back upper-case)."""
    return {key.lower(): value for key, value in mapping.items()}


@pytest.mark.parametrize("source_suffix, out_suffix",
                         [("mkv", "mp4"), ("mp4", "mkv"), ("mkv", "mkv"), ("mp4", "mov")])
def test_file_and_stream_tags_are_carried_and_stale_ones_are_not(cli, tmp_path, source_suffix,
                                                                 out_suffix):
    stale = {"BPS": "1234", "NUMBER_OF_FRAMES": "999", "encoder": "Lavc old libx264"}
    source = write_tagged(tmp_path / f"in.{source_suffix}",
                          file_tags={"title": "The film", "comment": "kept as it was"},
                          video_tags={"language": "fra", "handler_name": "Picture",
                                      "title": "Main view", **stale},
                          audio_tags={"language": "spa", "handler_name": "Sound",
                                      "title": "Commentary", "encoder": "Lavc aac"})
    out = tmp_path / f"out.{out_suffix}"
    run(cli, source, out)
    with av.open(str(out)) as container:
        file, (video, audio) = tags(container.metadata), (tags(s.metadata)
                                                          for s in container.streams)
    assert file["title"] == "The film" and file["comment"] == "kept as it was"
    # MP4/MOV store a track's title as its name
    title = "name" if out_suffix in ("mp4", "mov") else "title"
    assert (video["handler_name"], video[title]) == ("Picture", "Main view")
    assert (audio["handler_name"], audio[title]) == ("Sound", "Commentary")
    assert (video["language"], audio["language"]) == ("fra", "spa")
    assert not {"bps", "number_of_frames"} & set(video)
    assert video.get("encoder") != "Lavc old libx264"  # the video was encoded anew
    if out_suffix == "mkv" and source_suffix == "mkv":  # the copied audio keeps its encoder tag
        assert audio["encoder"] == "Lavc aac"


@pytest.mark.parametrize("source_suffix, out_suffix, codec",
                         [("mp4", "mp4", None), ("mkv", "ts", None),
                                                          ("mp4", "mkv", "mpeg4")])
def test_anamorphic_pixels_keep_their_aspect_ratio(cli, tmp_path, source_suffix, out_suffix, codec):
    """720x576 PAL DVD video of 16/15-wide pixels is shown 4:3; written square it would be
    squeezed."""
    source = write_tagged(tmp_path / f"in.{source_suffix}", sample_aspect_ratio=Fraction(16, 15))
    out = tmp_path / f"out.{out_suffix}"
    run(cli, source, out, *(["--codec", codec] if codec else []))
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        assert stream.sample_aspect_ratio == stream.codec_context.sample_aspect_ratio == Fraction(
            16, 15)
        assert (stream.codec_context.width, stream.codec_context.height) == (64, 48)


@pytest.mark.parametrize("chain, size, aspect", [
    ("scale:w=96,h=48", (96, 48), None),  # 64 pixels of 3/2 are 96 square ones wide
    ("scale:w=32,h=-2", (32, 24), Fraction(3, 2)),  # both sides halved: pixels as they were
    ("scale:w=64,h=96", (64, 96), Fraction(3)),  # twice as many rows: pixels half as tall
    ("crop:w=32,h=32", (32, 32), Fraction(3, 2)),  # a window of the same pixels
])
def test_scaled_anamorphic_pixels_keep_the_display_aspect_ratio(cli, tmp_path, chain, size,
                                                                 aspect):
    """scale resamples the picture, so a pixel's shape changes with the ratio of the sides
    (FFmpeg's scale sets the output's aspect ratio alike); crop keeps the pixels."""
    source = write_tagged(tmp_path / "in.mp4", sample_aspect_ratio=Fraction(3, 2))
    out = tmp_path / "out.mp4"
    run(cli, source, out, "--filter", chain)
    with av.open(str(out)) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.width, stream.codec_context.height) == size
        # untagged reads as None or as 0/1, by PyAV's version
        assert _tagged(stream.sample_aspect_ratio) == _tagged(
            stream.codec_context.sample_aspect_ratio) == aspect


def _tagged(ratio) -> Fraction | None:
    """A pixel aspect ratio as read from PyAV, None where the file states none."""
    return None if ratio is None or ratio.numerator == 0 else Fraction(ratio.numerator,
                                                                        ratio.denominator)


@pytest.mark.parametrize("suffix", ["mp4", "mov", "ts", "mkv"])
def test_limited_range_is_kept_with_the_matrix_unspecified(cli, tmp_path, suffix):
    # Matroska holds the range itself; libx264 writes none with everything else unspecified.
    source = write_tagged(tmp_path / "in.mkv", colour=(1, 2, 2, 2))
    with av.open(str(source)) as container:
        assert next(container.decode(video=0)).color_range == 1
    out = tmp_path / f"out.{suffix}"
    run(cli, source, out)
    with av.open(str(out)) as container:
        frame = next(container.decode(video=0))
        assert container.streams.video[0].codec_context.name == "h264"
    assert (frame.color_range, frame.colorspace, frame.color_primaries,
            frame.color_trc) == (1, 2, 2, 2)


def test_an_unspecified_range_stays_unspecified(cli, tmp_path):
    source = write_tagged(tmp_path / "in.mp4", colour=(0, 2, 2, 2))
    out = tmp_path / "out.mov"
    run(cli, source, out)
    with av.open(str(out)) as container:
        assert next(container.decode(video=0)).color_range == 0


def hdr_source(path):
    """A 10-bit HEVC clip (BT.2020, PQ) with HDR10 mastering display and content light level."""
    options = {"x265-params": f"log-level=error:master-display={MASTER_DISPLAY}:max-cll=1000,400"}
    return write_tagged(path, "libx265", "yuv420p10le", colour=(1, 9, 9, 16), options=options)


def first_hdr(path) -> HdrMetadata | None:
    with av.open(str(path)) as container:
        return HdrMetadata.of(next(container.decode(video=0)))


def test_hdr_metadata_is_read_as_written(tmp_path):
    hdr = first_hdr(hdr_source(tmp_path / "in.mkv"))
    assert hdr.primaries == ((Fraction(34000, 50000), Fraction(16000, 50000)),
                             (Fraction(13250, 50000), Fraction(34500, 50000)),
                             (Fraction(7500, 50000), Fraction(3000, 50000)))
    assert hdr.white == (Fraction(15635, 50000), Fraction(16450, 50000))
    assert hdr.luminance == (Fraction(50, 10000), Fraction(1000)) and hdr.light_level == (1000, 400)
    assert hdr.master_display(decimal=False) == MASTER_DISPLAY


@pytest.mark.parametrize("codec, suffix",
                         [("libx265", "mkv"), ("libx264", "mp4"), ("libsvtav1", "mkv")])
def test_hdr_metadata_reaches_the_encoders_that_take_it(cli, tmp_path, codec, suffix):
    if codec not in av.codecs_available:
        pytest.skip(f"this PyAV build has no {codec}")
    source = hdr_source(tmp_path / "in.mkv")
    out = tmp_path / f"out.{suffix}"
    run(cli, source, out, "--codec", codec, *(["--preset", "12"] if codec == "libsvtav1" else []))
    written, wanted = first_hdr(out), first_hdr(source)
    assert written.light_level == wanted.light_level == (1000, 400)
    # AV1 stores chromaticities in 1/65536, luminance in 1/256 and 1/16384 cd/m²
    if codec == "libsvtav1":
        assert np.allclose(np.array(written.primaries, float), np.array(wanted.primaries, float),
                           atol=2e-5)
        assert np.allclose(np.array(written.luminance, float), np.array(wanted.luminance, float),
                           atol=1e-4)
    else:
        assert written == wanted


def test_an_encoder_not_told_hdr_metadata_says_it_is_lost(cli, tmp_path):
    if "libvpx-vp9" not in av.codecs_available:
        pytest.skip("this PyAV build has no libvpx-vp9")
    out = tmp_path / "out.webm"
    result = run(cli, hdr_source(tmp_path / "in.mkv"), out)
    assert "HDR mastering display and content light level are not written: libvpx-vp9" in result.stderr
    assert first_hdr(out) is None


def test_encoder_params_given_are_kept_and_the_rest_added():
    hdr = HdrMetadata(light_level=(1000, 400), luminance=(Fraction(1, 200), Fraction(1000)),
                      primaries=((Fraction(17, 25), Fraction(8, 25)),
                                 (Fraction(53, 200), Fraction(69, 100)),
                                 (Fraction(3, 20), Fraction(3, 50))),
                      white=(Fraction(3127, 10000), Fraction(329, 1000)))
    options = signalled_options("libx265",
                                {"x265-params": "log-level=error:max-cll=500,100", "crf": "20"},
                                None, hdr, "out.mkv")
    assert options == {"x265-params": f"log-level=error:max-cll=500,100:master-display={MASTER_DISPLAY}",
                       "crf": "20"}
    assert signalled_options("libsvtav1", {}, None, hdr, "out.mkv") == {"svtav1-params": (
        "mastering-display=G(0.26500,0.69000)B(0.15000,0.06000)R(0.68000,0.32000)WP(0.31270,0.32900)"
        "L(1000.0000,0.0050):content-light=1000,400")}
