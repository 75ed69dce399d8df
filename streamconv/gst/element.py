"""The ``streamconv`` GStreamer element: streamconv's filter chain inside a GStreamer pipeline,
frames filtered in place (the buffer that came in goes out), through the same slots, backends
and colour conversion as ``streamconv run``.

A frame is queued in ``transform_ip`` and comes out of ``generate_output`` once done (on the
cuda backend up to ``ring-depth`` frames later); EOS, a caps or segment change, a gap and a
drain query first push out every frame in flight, a flush drops them. The latency query adds the
frames held; late frames are skipped (QoS, BaseTransform's own); every error is a GStreamer
error with streamconv's message.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

from .. import FilterSpecError, RunStats, StreamconvError
from .bindings import GObject, Gst, GstBase, GstVideo
from .buffers import FrameGeometry
from .cuda_memory import DeviceFrames, SharedCudaContext
from .engine import HostRing, added_latency, frames_in_flight
from .formats import CUDA_FEATURE, FrameFormat, caps_string, colour_tags, frame_format
from .properties import PROPERTIES, reports_errors, stats_structure
from .seam import cuda_status, make_engine
from .settings import Settings

_OK, _ERROR, _QUEUED = Gst.FlowReturn.OK, Gst.FlowReturn.ERROR, Gst.FlowReturn.CUSTOM_SUCCESS
_DESCRIPTION = (
    "2D convolution filters (blur, sharpen, edges, your own taps) on an NVIDIA GPU or "
    "the CPU, frames filtered in place; CUDA memory stays on the GPU"
)
_DRAINING_EVENTS = (Gst.EventType.EOS, Gst.EventType.CAPS, Gst.EventType.SEGMENT, Gst.EventType.GAP)


def _template(direction: Gst.PadDirection) -> Gst.PadTemplate:
    caps = Gst.Caps.from_string(f"{caps_string(device=False)}; {caps_string(device=True)}")
    return Gst.PadTemplate.new(
        "src" if direction == Gst.PadDirection.SRC else "sink",
        direction,
        Gst.PadPresence.ALWAYS,
        caps,
    )


class _Engine(NamedTuple):
    """What :func:`streamconv.embed.filter.make_engine` made of the properties."""

    stages: list
    border: str
    name: str  # the backend's: cpu or cuda
    backend: Any


class _Caps:
    """What the negotiated caps say of each frame."""

    def __init__(self, caps: Gst.Caps) -> None:
        info = GstVideo.VideoInfo.new_from_caps(caps)
        self.device = caps.get_features(0).contains(CUDA_FEATURE)
        self.format: FrameFormat = frame_format(
            GstVideo.VideoFormat.to_string(info.finfo.format), device=self.device
        )
        planes = info.finfo.n_planes
        self.geometry = FrameGeometry(
            info.width, info.height, tuple(info.offset[:planes]), tuple(info.stride[:planes])
        )
        self.colour = colour_tags(info.colorimetry.matrix, info.colorimetry.range)
        self.frame_duration = (
            Gst.util_uint64_scale(Gst.SECOND, info.fps_d, info.fps_n) if info.fps_n else None
        )
        self.size = info.size

    def geometry_of(self, buffer: Gst.Buffer) -> FrameGeometry:
        """The buffer's own plane layout where it carries a GstVideoMeta, else the caps'."""
        meta = GstVideo.buffer_get_video_meta(buffer)
        if meta is None:
            return self.geometry
        planes = meta.n_planes
        return FrameGeometry(
            meta.width, meta.height, tuple(meta.offset[:planes]), tuple(meta.stride[:planes])
        )


class StreamconvFilter(GstBase.BaseTransform):
    """2D convolution filters (streamconv's) on raw video, in place, on the GPU or the CPU."""

    __gtype_name__ = "GstStreamconv"
    __gstmetadata__ = ("streamconv", "Filter/Effect/Video", _DESCRIPTION, "streamconv")
    __gsttemplates__ = (_template(Gst.PadDirection.SRC), _template(Gst.PadDirection.SINK))
    __gproperties__ = PROPERTIES

    def __init__(self) -> None:
        super().__init__()
        self.set_in_place(True)
        self.set_qos_enabled(True)
        self._settings = Settings()
        self._lock = threading.Lock()  # settings and stats: read by the application's thread
        self._stats = RunStats()
        self._engine: _Engine | None = None  # once started
        self._ring: HostRing | None = None
        self._device_frames: DeviceFrames | None = None
        self._shared: SharedCudaContext | None = None
        self._caps: _Caps | None = None
        self._rebuild = False  # filter or border changed while running: new chain at the next frame
        self._built: tuple = ()  # the settings the running chain was made from

    # properties ---------------------------------------------------------------------------

    def do_get_property(self, prop: GObject.ParamSpec) -> Any:
        with self._lock:
            if prop.name == "stats":
                return stats_structure(self._stats)
            if prop.name in ("frames", "dropped"):
                return getattr(self._stats, prop.name)
            return self._settings.get(prop.name)

    def do_set_property(self, prop: GObject.ParamSpec, value: Any) -> None:
        with self._lock:
            self._settings.set(prop.name, value)
            if prop.name in ("filter", "border") and self._engine is not None:
                # a chain made anew starts a new window across frames: only for a real change
                self._rebuild = self._settings.chain_key() != self._built

    # states -------------------------------------------------------------------------------

    @reports_errors(Gst.StateChangeReturn.FAILURE)
    def do_change_state(self, transition: Gst.StateChange) -> Gst.StateChangeReturn:
        """Share the CUDA context on NULL -> READY, let it go on READY -> NULL."""
        if transition == Gst.StateChange.NULL_TO_READY:
            self._share_cuda_context()
        result = Gst.Element.do_change_state(self, transition)
        if transition == Gst.StateChange.READY_TO_NULL and self._shared is not None:
            self._shared.close()
            self._shared = None
        return result

    def _share_cuda_context(self) -> None:
        """Before the pipeline's CUDA elements open (upstream goes to READY after this element),
        offer them the device's primary context, so that the CUDA memory they hand over is usable
        here. Only where the cuda backend may run; a pipeline of system memory needs none of it."""
        settings = self._settings
        if settings.backend == "cpu" or not cuda_status(settings.device)[0]:
            return
        try:
            self._shared = SharedCudaContext(settings.device)
        except StreamconvError as exc:  # reported if CUDA memory is negotiated; else not needed
            Gst.debug(f"streamconv: no CUDA context to share: {exc}")
            return
        self.post_message(Gst.Message.new_have_context(self, self._shared.gst_context()))

    @reports_errors(False)
    def do_start(self) -> bool:
        engine = self._open_engine()
        with self._lock:
            self._stats = RunStats(backend=engine.backend.describe())
        return True

    def _open_engine(self) -> _Engine:
        """Check the properties and make the backend (in the state change's thread)."""
        with self._lock:
            chain, border = self._settings.resolve()
            settings = self._settings
            self._rebuild = False
            self._built = settings.chain_key()
        resizing = [stage.describe() for stage in chain.stages if stage.geometry is not None]
        if resizing:
            raise FilterSpecError(
                f"{', '.join(resizing)}: the element filters each frame in place, at its size; "
                "change the size with videoscale or videocrop beside it")
        self._engine = _Engine(*make_engine(list(chain.stages), border=border,
                                            backend=settings.backend, device=settings.device,
                                            kernel=settings.kernel))
        self.set_passthrough(not chain.stages)
        return self._engine

    @reports_errors(False)
    def do_stop(self) -> bool:
        self._close_paths()
        if self._engine is not None:
            engine, self._engine = self._engine, None
            engine.backend.close()
        self._caps = None
        return True

    def _close_paths(self) -> None:
        """Let the frames in flight go and free the slots and the device filter."""
        ring, device_frames = self._ring, self._device_frames
        self._ring = self._device_frames = None
        try:
            if ring is not None:
                ring.close()
        finally:
            if device_frames is not None:
                device_frames.close()

    # caps ---------------------------------------------------------------------------------

    @reports_errors(False)
    def do_set_caps(self, incaps: Gst.Caps, outcaps: Gst.Caps) -> bool:
        """New caps (the frames in flight drained): slots or the device path made for them."""
        caps = _Caps(incaps)
        old = self._caps
        self._caps = caps
        self._configure()
        if old is not None and old.frame_duration != caps.frame_duration:
            self.post_message(Gst.Message.new_latency(self))
        return True

    def _configure(self) -> None:
        """Make the frame path for the current caps and chain (frames in flight drained already)."""
        caps, engine = self._caps, self._engine
        if caps is None or engine is None:
            return
        depth = frames_in_flight(engine.name, self._settings.ring_depth)
        if caps.device:
            self._close_paths()
            self._device_frames = self._open_device_frames(engine, depth)
            return
        if self._ring is None or self._ring.backend is not engine.backend:
            self._close_paths()
            self._ring = HostRing(engine.backend, depth, self._stats)
        self._ring.configure(caps.format, caps.geometry, caps.colour)

    def _open_device_frames(self, engine: _Engine, depth: int) -> DeviceFrames:
        if engine.name != "cuda":
            raise StreamconvError(
                "frames in CUDA memory need the cuda backend; this streamconv runs on "
                f"{engine.name} (backend=cuda, or download them with cudadownload first)")
        across = [stage.describe() for stage in engine.stages if stage.temporal is not None]
        if across:
            raise FilterSpecError(
                f"{', '.join(across)}: filters across frames take frames in system memory in "
                "the element (put cudadownload before it)")
        if self._shared is None:
            self._shared = SharedCudaContext(self._settings.device)  # raises with the reason
        return DeviceFrames(engine.stages, border=engine.border, device=self._settings.device,
                            kernel=self._settings.kernel, in_flight=depth, shared=self._shared,
                            stats=self._stats)

    # frames -------------------------------------------------------------------------------

    @reports_errors(_ERROR)
    def do_transform_ip(self, buffer: Gst.Buffer) -> Gst.FlowReturn:
        """Queue one frame (its buffer kept until it is done); QUEUED tells BaseTransform so."""
        caps = self._caps
        if self.is_passthrough() or caps is None:
            return _OK  # the chain became empty: this frame goes through as it is
        if self._device_frames is not None:
            flags = Gst.MapFlags(
                Gst.MapFlags.READ | Gst.MapFlags.WRITE | self._device_frames.shared.map_flag
            )
            self._device_frames.submit(buffer, caps.format, caps.geometry_of(buffer), flags)
            return _QUEUED
        ok, mapping = buffer.map(Gst.MapFlags.READ)
        if not ok:
            raise StreamconvError("an input buffer could not be mapped for reading")
        try:
            self._host_ring().submit(mapping.data, buffer, caps.geometry_of(buffer))
        finally:
            buffer.unmap(mapping)
        return _QUEUED

    def _host_ring(self) -> HostRing:
        if self._ring is None:
            raise StreamconvError("a frame came before its caps")
        return self._ring

    @reports_errors((_ERROR, None))
    def do_generate_output(self) -> tuple[Gst.FlowReturn, Gst.Buffer | None]:
        """The next frame to push, if one is done; BaseTransform calls again until None."""
        result, passed = GstBase.BaseTransform.do_generate_output(self)  # calls do_transform_ip
        if result == _OK and passed is not None:
            return result, passed  # passthrough: nothing is held (a change of chain drained first)
        del passed  # the frame transform_ip queued: its own reference is kept with it
        if result not in (_OK, _QUEUED):
            return result, None
        return _OK, self._next_output(wait=False)

    def _next_output(self, *, wait: bool) -> Gst.Buffer | None:
        """The oldest frame in flight, filtered into its buffer, if done (or waited for)."""
        if self._device_frames is not None:
            return self._device_frames.take(wait=wait)
        if self._ring is None:
            return None
        taken = self._ring.take(wait=wait)
        if taken is None:
            return None
        slot, held = taken
        buffer = held.note
        ok, mapping = buffer.map(Gst.MapFlags.WRITE)
        if not ok:
            self._ring.give_back(slot)
            raise StreamconvError("a buffer in flight could not be mapped for writing")
        try:
            return self._ring.write_out(slot, held, mapping.data)
        finally:
            buffer.unmap(mapping)

    def _held(self) -> int:
        path = self._device_frames or self._ring
        return path.held if path is not None else 0

    def _drain(self) -> Gst.FlowReturn:
        """Push out every frame in flight, oldest first (before an EOS, caps or segment, say)."""
        result = _OK
        while self._held():
            buffer = self._next_output(wait=True)
            if result == _OK and buffer is not None:
                result = self.srcpad.push(buffer)  # after a failed push the rest are only let go
        if self._ring is not None:
            self._ring.end_stream()  # stages across frames flushed their tail: a new window next
        return result

    def _drop(self) -> None:
        for path in (self._ring, self._device_frames):
            if path is not None:
                path.drop()

    def _new_chain(self) -> Gst.FlowReturn:
        """The filter or border changed while running: finish the frames in flight with the old
        chain, then make the new one for the same caps."""
        result = self._drain()
        self._close_paths()
        old, latency = self._engine, self._added_latency()
        held = self._frames_held(old) if old is not None else 0
        self._open_engine()
        if old is not None:
            old.backend.close()
        self._configure()
        if self._added_latency() != latency:  # a live pipeline set its latency from the old one
            self.post_message(Gst.Message.new_latency(self))
        if self._engine is not None and self._frames_held(self._engine) > held:
            # upstream's pool was sized for the old chain's frames held, and may not grow
            # (v4l2src's): the allocation query is asked anew before its next buffer
            self.sinkpad.push_event(Gst.Event.new_reconfigure())
        return result

    # events and queries ---------------------------------------------------------------------

    @reports_errors(False)
    def do_sink_event(self, event: Gst.Event) -> bool:
        """Frames in flight go out before serialized events that end or change the stream."""
        if event.type in _DRAINING_EVENTS and self._drain() not in (_OK, Gst.FlowReturn.EOS):
            Gst.debug("streamconv: frames in flight were not all taken downstream")
        elif event.type == Gst.EventType.FLUSH_STOP:
            self._drop()
        return GstBase.BaseTransform.do_sink_event(self, event)

    @reports_errors(False)
    def do_gst_base_transform_query(self, direction: Gst.PadDirection, query: Gst.Query) -> bool:
        """BaseTransform's ``query`` (PyGObject's name for it: GstElement has a ``query`` too)."""
        if (
            query.type == Gst.QueryType.CONTEXT
            and self._shared is not None
            and self._shared.answer(self, query)
        ):
            return True
        if query.type == Gst.QueryType.DRAIN and direction == Gst.PadDirection.SINK:
            self._drain()
        answered = GstBase.BaseTransform.do_query(self, direction, query)
        if answered and query.type == Gst.QueryType.LATENCY and direction == Gst.PadDirection.SRC:
            live, least, most = query.parse_latency()
            added = self._added_latency()
            query.set_latency(
                live, least + added, most if most == Gst.CLOCK_TIME_NONE else most + added
            )
        return answered

    def _added_latency(self) -> int:
        """Nanoseconds this element can hold a frame: the frames in flight beyond the newest."""
        caps, engine = self._caps, self._engine
        if caps is None or engine is None:
            return 0
        return added_latency(self._frames_held(engine), caps.frame_duration)

    def _frames_held(self, engine: _Engine) -> int:
        """Buffers this element can hold at once: the frames in flight, and the frames a chain
        with stages across frames keeps until the ones after them have come."""
        return frames_in_flight(engine.name, self._settings.ring_depth) + engine.backend.delay

    @reports_errors(False)
    def do_propose_allocation(self, decide_query: Gst.Query | None, query: Gst.Query) -> bool:
        """Downstream's answer, with room in upstream's pool for the frames held here."""
        # In place, the buffers upstream allocates are the ones downstream gets: its answer is ours
        # (BaseTransform's own, which does this, cannot be called with decide_query None from here).
        answered = self.srcpad.peer_query(query)
        engine, caps = self._engine, self._caps
        if engine is None or caps is None:
            return answered
        held = self._frames_held(engine)
        if held > 1:  # upstream's pool must outlast the buffers held here
            if query.get_n_allocation_pools() == 0:
                query.add_allocation_pool(None, caps.size, 0, 0)
            for index in range(query.get_n_allocation_pools()):
                pool, size, least, most = query.parse_nth_allocation_pool(index)
                query.set_nth_allocation_pool(
                    index, pool, size, least + held, most + held if most else 0
                )
        return True if held > 1 else answered

    @reports_errors(_ERROR)
    def do_submit_input_buffer(self, is_discont: bool, buffer: Gst.Buffer) -> Gst.FlowReturn:
        """BaseTransform's (negotiation, QoS), counting the frames its QoS skips; a filter or
        border changed since the last frame takes effect here."""
        if self._rebuild:
            # Before BaseTransform prepares the frame's buffer: it makes a shared buffer writable
            # only when not in passthrough, which an empty chain set and the new chain may unset.
            drained = self._new_chain()
            if drained != _OK:
                return drained
        result = GstBase.BaseTransform.do_submit_input_buffer(self, is_discont, buffer)
        if result == _QUEUED:  # BaseTransform's QoS skipped it: too late to be shown
            with self._lock:
                self._stats.dropped += 1
        return result


GObject.type_register(StreamconvFilter)
ELEMENT_FACTORY = ("streamconv", Gst.Rank.NONE, StreamconvFilter)
"""What GStreamer's Python plugin loader registers (``__gstelementfactory__``)."""
