/*
 * The kernel_ipsec_t of the p4sec plugin: each call becomes one JSON line to the p4sec controller's IKE
 * endpoint (a UNIX socket, charon.plugins.p4sec.socket) and waits for its one-line answer; a second
 * connection receives the controller's lifetime events (soft/hard expiry from the switch's per-SA counters)
 * and raises them in charon.
 */
#ifndef P4SEC_IPSEC_H_
#define P4SEC_IPSEC_H_

#include <kernel/kernel_ipsec.h>

kernel_ipsec_t *p4sec_ipsec_create();

#endif
