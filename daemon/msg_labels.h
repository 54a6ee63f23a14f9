/*
 * msg_labels.h — a cell's labels from fields of its KPI messages (ingest.labels: label →
 * message field, e.g. site: site_id), kept per cell beside the topology file (topology.h:
 * the file's label wins where it gives one; a message's fills in the others and the cells
 * the file does not list). Values are interned: one copy per distinct value, one array of
 * pointers per cell, nothing allocated for a message that repeats what the cell has.
 *
 * Read from the messages whose records were accepted (ccd_msg_labels_read: the element of
 * each accepted record, its cell id as the decoder read it). A value is a string of 1..64
 * bytes without control characters, or an integer (|v| ≤ 2^53, its decimal text); "" clears the
 * label; null, or a message without the field, leaves it as it was. Anything else — too long,
 * another type, a control character — is refused and counted, the cell's other labels still apply.
 * A message that names none of the fields is not parsed a second time. Pure: jansson and strmap
 * only (the fuzz target builds it). Loop thread only.
 */
#ifndef CCD_MSG_LABELS_H
#define CCD_MSG_LABELS_H

#include <stddef.h>
#include <stdint.h>

#include "cc_kpi.h"
#include "strmap.h"

#define CCD_MSG_LABELS_MAX 16      /* labels read from messages */
#define CCD_MSG_LABEL_VALUE_MAX 64 /* bytes of a value */

typedef struct CcdMsgLabelStats {
    uint64_t messages;  ///< messages scanned for labels (named at least one field)
    uint64_t changes;   ///< label values set or cleared on a cell
    uint64_t too_long;  ///< values refused: longer than CCD_MSG_LABEL_VALUE_MAX
    uint64_t bad_value; ///< values refused: not a string or integer, or a control character
    uint64_t not_json;  ///< messages the label pass could not parse (the decoder's fast
                        ///< path took them; jansson did not): none expected
    uint64_t oom;       ///< values not stored for want of memory
    size_t cells;       ///< cells with at least one label from messages
    size_t values;      ///< distinct values interned
} CcdMsgLabelStats;

typedef struct CcdMsgLabels CcdMsgLabels;

/** Opens the store for n labels: names[i] (the label) read from fields[i] (the message
 *  field); strings copied. 0, -EINVAL (n out of 1..CCD_MSG_LABELS_MAX, an empty name or
 *  field) or -ENOMEM. */
int ccd_msg_labels_open(CcdMsgLabels **out, const char *const *names, const char *const *fields,
                        int n);
void ccd_msg_labels_close(CcdMsgLabels **m);
/** The same names and fields in the same order (a reload keeps the store). */
int ccd_msg_labels_same(const CcdMsgLabels *m, const char *const *names, const char *const *fields,
                        int n);

/** Reads the label fields of the elements of message buf[0..len) that gave the batch's
 *  records (cell_field: the decoder's cell member, kpis_field its KPI object: labels are
 *  read at the record's top level). Returns the label changes made. */
int ccd_msg_labels_read(CcdMsgLabels *m, const char *buf, size_t len, const CcKpiBatch *kb);

/** The cell's label `name` from its messages, NULL when none. */
const char *ccd_msg_labels_get(const CcdMsgLabels *m, const char *cell, const char *name);
/** Labels: their count; name i (NULL past the count). */
int ccd_msg_labels_n(const CcdMsgLabels *m);
const char *ccd_msg_labels_name(const CcdMsgLabels *m, int i);
/** The cell's value of label i (NULL: none). */
const char *ccd_msg_labels_value(const CcdMsgLabels *m, const char *cell, int i);
/** Cells whose messages gave label `name` the value `value`, but those the shadow gives
 *  that label (the topology file: its value wins). */
int ccd_msg_labels_count(const CcdMsgLabels *m, const char *name, const char *value);
/** Sets the shadow (NULL: none): shadowed(cookie, cell, name) says whether another source
 *  gives the cell that label; the counts are taken again (O(cells): at a reload). */
void ccd_msg_labels_shadow(CcdMsgLabels *m,
                           int (*shadowed)(const void *cookie, const char *cell, const char *name),
                           const void *cookie);

void ccd_msg_labels_stats(const CcdMsgLabels *m, CcdMsgLabelStats *st);

#endif
