// hold.cu: one thread that keeps its stream busy for a given time. A benchmark queues it first
// and its timed launches behind it, so that they run back to back on the GPU however long the
// host takes to queue each (streamconv/bench/timing.py, time_launches).
//
// Launch: block (1, 1, 1), grid (1, 1, 1). Takes no macros.

extern "C" __global__ void hold_stream(unsigned long long nanoseconds) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}
