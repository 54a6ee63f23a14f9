/*
 * learn_windows.h — maintenance windows kept out of `cellcast learn`'s training rows
 * (issue 32): the maintenance silences of cellcastd's files (silences.file, silences.path
 * or a saved GET /v1/silences; daemon/silences.h), matched on each sampled cell's labels
 * (cell, and site, region, sector from cellcastd's topology.path CSV), and every record of
 * the store stamped within one of their windows marked missing (cc_learn_exclude).
 */
#ifndef CCT_LEARN_WINDOWS_H
#define CCT_LEARN_WINDOWS_H

#include <stddef.h>
#include <stdint.h>

#include "cc_learn.h"

#define CCT_WINDOWS_MAX_FILES 8

/**
 * Reads the n silence files and the topology CSV (NULL: cells have no site, region or
 * sector) and marks missing the store's records in their maintenance windows. Returns the
 * records marked (≥ 0), or -EINVAL / -EIO / -ENOMEM with a message naming the file.
 */
int64_t cct_windows_exclude(CcLearn *l, const char *const *silence_files, int n,
                            const char *topology, char *err, size_t errlen);

#endif
