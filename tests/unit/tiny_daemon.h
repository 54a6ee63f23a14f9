/*
 * tiny_daemon.h — the daemon's state as the unit tests that link daemon/ modules without
 * main build it (test_alerts_unit.c, test_cell_record_unit.c): the configuration's
 * defaults, the tiny golden model (testlib.h TL_TINY_MODEL: F=3, HZ=6), its settings, the
 * engine, the cell table and the alerts (no Kafka, no journal).
 */
#ifndef CC_TINY_DAEMON_H
#define CC_TINY_DAEMON_H

#include "cellcastd.h"
#include "settings.h"

/** Fills d (zeroed by the caller) and st as above; a failure fails the calling test (cmocka).
 *  Undo with tiny_daemon_close. */
void tiny_daemon_open(Ccd *d, CcdSettings *st);

/** Closes what tiny_daemon_open opened, in the reverse order. */
void tiny_daemon_close(Ccd *d, CcdSettings *st);

#endif
