/*
 * embedded_port.h — a stable bootstrap address for the embedded broker
 * (kafka.embedded_port). librdkafka 2.0's mock cluster listens on an ephemeral port that
 * changes at every start, so a producer configured with it loses its broker at a restart.
 * This forwards connections from 127.0.0.1:<kafka.embedded_port> to the mock: clients
 * bootstrap there, learn the mock's current address from its metadata, and after a
 * restart (the old address gone) bootstrap there again. Loop thread (libevent).
 */
#ifndef CCD_EMBEDDED_PORT_H
#define CCD_EMBEDDED_PORT_H

#include <stddef.h>

#include "cellcastd.h"

typedef struct CcdEmbeddedPort CcdEmbeddedPort;

/** Listens on 127.0.0.1:port and forwards to target ("127.0.0.1:NNNN"). 0 or -errno with
 *  a message (the port in use: -EADDRINUSE). */
int ccd_embedded_port_open(CcdEmbeddedPort **out, struct event_base *base, int port,
                           const char *target, char *err, size_t errlen);
void ccd_embedded_port_close(CcdEmbeddedPort **p);

#endif
