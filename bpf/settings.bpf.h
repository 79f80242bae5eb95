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

#endif /* OFFCPU_SETTINGS_BPF_H */
