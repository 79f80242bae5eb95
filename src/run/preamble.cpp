#include "run/preamble.h"

#include "collect/bpf_util.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/privileges.h"
#include "util/signals.h"

namespace offcpu {

void prepare_tracing(bool verbose, const MapDemand &maps) {
  install_stop_handlers();
  require_bpf_privileges();
  raise_fd_limit();
  capture_libbpf_messages(verbose);
  check_map_budget(maps, system_files());
}

void require_btf(bool has_btf) {
  if (!has_btf)
    throw runtime_error(
        "this kernel has no BTF (/sys/kernel/btf/vmlinux): "
        "offcpu needs a kernel built with CONFIG_DEBUG_INFO_BTF=y");
}

} // namespace offcpu
