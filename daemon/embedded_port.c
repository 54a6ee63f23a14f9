/*
 * embedded_port.c — the embedded broker's stable bootstrap port (embedded_port.h): a
 * byte-for-byte TCP forwarder, one pair of bufferevents per client connection.
 */
#include "embedded_port.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct CcdEmbeddedPort {
    struct event_base *base;
    struct evconnlistener *lis;
    struct sockaddr_in target;
};

/* Either side's input goes to the other's output; at EOF or error of one side, the other
 * is closed once what it still has to write is written. */
static void pipe_read(struct bufferevent *bev, void *arg)
{
    struct bufferevent *peer = arg;
    if (peer)
        bufferevent_write_buffer(peer, bufferevent_get_input(bev));
    else
        evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
}

static void close_when_flushed(struct bufferevent *bev, void *arg)
{
    (void)arg;
    if (!evbuffer_get_length(bufferevent_get_output(bev)))
        bufferevent_free(bev);
}

static void pipe_event(struct bufferevent *bev, short what, void *arg)
{
    struct bufferevent *peer = arg;
    if (what & BEV_EVENT_CONNECTED)
        return;
    if (peer) {
        pipe_read(bev, peer); /* what arrived with the close */
        bufferevent_setcb(peer, NULL, close_when_flushed, pipe_event, NULL);
        bufferevent_disable(peer, EV_READ);
        close_when_flushed(peer, NULL);
    }
    bufferevent_free(bev);
}

static void on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    CcdEmbeddedPort *p = arg;
    (void)lis, (void)sa, (void)salen;
    struct bufferevent *c = bufferevent_socket_new(p->base, fd, BEV_OPT_CLOSE_ON_FREE);
    struct bufferevent *b = bufferevent_socket_new(p->base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!c || !b ||
        bufferevent_socket_connect(b, (struct sockaddr *)&p->target, sizeof p->target) < 0) {
        CCD_LOG_RL(CC_LOG_WARN, "kafka", "embedded broker port: cannot forward a connection");
        if (c)
            bufferevent_free(c);
        else
            evutil_closesocket(fd);
        if (b)
            bufferevent_free(b);
        return;
    }
    bufferevent_setcb(c, pipe_read, NULL, pipe_event, b);
    bufferevent_setcb(b, pipe_read, NULL, pipe_event, c);
    bufferevent_enable(c, EV_READ | EV_WRITE);
    bufferevent_enable(b, EV_READ | EV_WRITE);
}

int ccd_embedded_port_open(CcdEmbeddedPort **out, struct event_base *base, int port,
                           const char *target, char *err, size_t errlen)
{
    const char *colon = strrchr(target, ':');
    CcdEmbeddedPort *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p)
        return cc_errf(err, errlen, -ENOMEM, "out of memory");
    p->base = base;
    p->target.sin_family = AF_INET;
    p->target.sin_port = htons((uint16_t)(colon ? atoi(colon + 1) : 0));
    p->target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    p->lis = evconnlistener_new_bind(
        base, on_accept, p, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, 64,
        (struct sockaddr *)&sin, sizeof sin);
    if (!p->lis) {
        int e = errno ? errno : EADDRINUSE;
        free(p);
        return cc_errf(err, errlen, -e,
                       "kafka.embedded_port %d: cannot listen on 127.0.0.1:%d: %s%s", port, port,
                       strerror(e),
                       e == EADDRINUSE ? " (another process has it: pick another port)" : "");
    }
    *out = p;
    return 0;
}

void ccd_embedded_port_close(CcdEmbeddedPort **pp)
{
    CcdEmbeddedPort *p = *pp;
    if (!p)
        return;
    evconnlistener_free(p->lis);
    free(p);
    *pp = NULL;
}
