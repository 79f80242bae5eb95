/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The programs' settings, one `const volatile` global each, from the one
 * list in include/offcpu/settings.h (their meaning is documented there).
 * The loader writes them into .rodata before load. Shared by every
 * program: each reads those it needs. */
#ifndef OFFCPU_SETTINGS_BPF_H
#define OFFCPU_SETTINGS_BPF_H

#include "offcpu/settings.h"

#define OFFCPU_DEFINE_SETTING(type, name, init) const volatile type name = init;
OFFCPU_SETTINGS(OFFCPU_DEFINE_SETTING)
#undef OFFCPU_DEFINE_SETTING
const volatile char target_name[OFFCPU_TARGET_NAME_LEN] = {};

/* Whether the programs return at once (the split load's first object,
 * which only creates the maps). Built with OFFCPU_MAPS_ONLY, that object's
 * programs compile to nothing else: the kernel's passes over each program
 * (control flow, liveness, CO-RE relocations, removing the dead code) then
 * have a few instructions to go through, not the whole hooks (10 of the
 * 16 ms of CPU that object took). Its globals and maps are the same
 * (tests/unit/bpf_objects_test.cpp). */
#ifdef OFFCPU_MAPS_ONLY
#define MAPS_ONLY 1
#else
#define MAPS_ONLY maps_only
#endif

#endif /* OFFCPU_SETTINGS_BPF_H */
