/*
 * auth.h — the admin token of cellcastd's protected routes (admin.token): POST
 * /v1/admin/reload, and POST /v1/kpis when http.post_kpis is `token`.
 */
#ifndef CCD_AUTH_H
#define CCD_AUTH_H

typedef struct CcdReq CcdReq;

/** 0 when the request carries "Authorization: Bearer <admin.token>" (compared in constant
 *  time); else answers the problem (403 no token configured, 401 none sent with a
 *  WWW-Authenticate challenge, 403 a wrong one) and returns its status. */
int ccd_require_admin(CcdReq *r);

#endif
