// Attach paths a command line can force, to exercise fallbacks on kernels
// that have the preferred path, or to work around an odd kernel. Auto
// probes the kernel and takes the best it offers.
#pragma once

namespace offcpu {

// Which sched_switch hook: BTF-enabled tracepoint or raw tracepoint.
enum class AttachChoice { Auto, TpBtf, RawTp };

// Where kernel stacks are taken: with the ORC walker when the task runs
// again (Orc), or by the kernel at every switch-out (SwitchOut).
enum class KernelUnwind { Auto, Orc, SwitchOut };

// How `offcpu rwsem` watches the rwsem slow path: fentry, then kprobes,
// then the lock:contention tracepoints.
enum class RwsemAttach { Auto, Fentry, Kprobe, Tracepoint };

} // namespace offcpu
