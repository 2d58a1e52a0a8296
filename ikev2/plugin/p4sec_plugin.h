/*
 * p4sec kernel-ipsec plugin for strongSwan's charon: the SAs and policies charon negotiates go to the p4sec
 * controller (its IKE endpoint, python/p4sec/ipsec/ike.py) instead of the kernel; the controller installs them
 * on the p4sec gateway's SPD/SAD over P4Runtime.
 */
#ifndef P4SEC_PLUGIN_H_
#define P4SEC_PLUGIN_H_

#include <plugins/plugin.h>

plugin_t *p4sec_plugin_create();

#endif
