// cgroup v2 paths and the ids the kernel knows them by (the cgroup
// directory's inode number, bpf_get_current_cgroup_id()'s value).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace offcpu {

// Where cgroup v2 is mounted (normally /sys/fs/cgroup).
std::string cgroup2_root();

// The id of a cgroup given as a path: absolute ("/sys/fs/cgroup/x/y"), or
// relative to the cgroup2 mount ("/system.slice/nginx.service", "x/y").
// Throws FatalError (usage) when it is not a cgroup v2 directory.
uint64_t cgroup_id(const std::string &path);

// The paths (relative to the mount, "/..." ) of these ids, found by one
// bounded walk of the hierarchy; ids not found are left out.
std::map<uint64_t, std::string> cgroup_paths(const std::vector<uint64_t> &ids);

// "nginx.service" for "/system.slice/nginx.service": the unit systemd runs
// the cgroup for, or the path when it is not one.
std::string cgroup_label(const std::string &path);

} // namespace offcpu
