/*
 * The p4sec plugin's registration: it provides charon's kernel-ipsec interface (load it before kernel-netlink,
 * which then provides only the network interface: addresses and routes).
 */
#include "p4sec_plugin.h"
#include "p4sec_ipsec.h"

#include <daemon.h>

typedef struct {
	plugin_t public;
} private_p4sec_plugin_t;

METHOD(plugin_t, get_name, char*,
	private_p4sec_plugin_t *this)
{
	return "p4sec";
}

METHOD(plugin_t, get_features, int,
	private_p4sec_plugin_t *this, plugin_feature_t *features[])
{
	static plugin_feature_t f[] = {
		PLUGIN_CALLBACK(kernel_ipsec_register, p4sec_ipsec_create),
			PLUGIN_PROVIDE(CUSTOM, "kernel-ipsec"),
	};
	*features = f;
	return countof(f);
}

METHOD(plugin_t, destroy, void,
	private_p4sec_plugin_t *this)
{
	free(this);
}

plugin_t *p4sec_plugin_create()
{
	private_p4sec_plugin_t *this;

	INIT(this,
		.public = {
			.get_name = _get_name,
			.get_features = _get_features,
			.destroy = _destroy,
		},
	);
	return &this->public;
}
