/*
 * charon's kernel-ipsec interface backed by the p4sec controller. Requests are JSON objects on one line
 * ({"op": "add_sa", "gw": GATEWAY, ...}); the answer is one line, {"ok":true,...} or {"ok":false,"error":"..."}
 * (the error is logged as charon's reason). SPIs travel in host byte order. Addresses and traffic selectors as
 * text; keys in hex. The connection is made on first use and made again once if it broke (a controller that
 * failed over to another process on the same socket path).
 */
#include "p4sec_ipsec.h"

#include <daemon.h>
#include <threading/mutex.h>
#include <threading/thread.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define DEFAULT_SOCKET "/run/p4sec/ike.sock"
#define LINE_MAX_LEN 65536

typedef struct private_p4sec_ipsec_t private_p4sec_ipsec_t;

struct private_p4sec_ipsec_t {
	kernel_ipsec_t public;
	char *path;
	char *gateway;
	int fd;
	mutex_t *mutex;
	int event_fd;
	thread_t *events;
	/* the controller was told this charon started (it removes what an earlier charon left) */
	bool announced;
};

/* a growing text buffer for one request */
typedef struct {
	char *s;
	size_t len, cap;
} buf_t;

static void put(buf_t *b, const char *fmt, ...)
{
	va_list args;
	int n;

	while (TRUE)
	{
		va_start(args, fmt);
		n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, args);
		va_end(args);
		if (n >= 0 && (size_t)n < b->cap - b->len)
		{
			b->len += n;
			return;
		}
		b->cap = b->cap * 2 + n + 64;
		b->s = realloc(b->s, b->cap);
	}
}

static void begin(buf_t *b, private_p4sec_ipsec_t *this, const char *op)
{
	b->cap = 1024;
	b->len = 0;
	b->s = malloc(b->cap);
	b->s[0] = '\0';
	put(b, "{\"op\":\"%s\",\"gw\":\"%s\"", op, this->gateway);
}

static void put_host(buf_t *b, const char *name, host_t *host)
{
	char addr[INET6_ADDRSTRLEN] = "";
	chunk_t raw;

	if (!host)
	{
		put(b, ",\"%s\":null", name);
		return;
	}
	raw = host->get_address(host);
	inet_ntop(host->get_family(host), raw.ptr, addr, sizeof(addr));
	put(b, ",\"%s\":\"%s\",\"%s_port\":%u", name, addr, name, host->get_port(host));
}

static void put_hex(buf_t *b, const char *name, chunk_t c)
{
	size_t i;

	put(b, ",\"%s\":\"", name);
	for (i = 0; i < c.len; i++)
	{
		put(b, "%02x", c.ptr[i]);
	}
	put(b, "\"");
}

static void put_ts(buf_t *b, traffic_selector_t *ts)
{
	host_t *net = NULL;
	uint8_t mask = 0;
	bool exact;
	char addr[INET6_ADDRSTRLEN] = "";
	chunk_t raw;

	exact = ts->to_subnet(ts, &net, &mask);
	if (net)
	{
		raw = net->get_address(net);
		inet_ntop(net->get_family(net), raw.ptr, addr, sizeof(addr));
		net->destroy(net);
	}
	put(b, "{\"net\":\"%s/%u\",\"exact\":%s,\"proto\":%u,\"from_port\":%u,\"to_port\":%u}", addr, mask,
		exact ? "true" : "false", ts->get_protocol(ts), ts->get_from_port(ts), ts->get_to_port(ts));
}

static void put_ts_list(buf_t *b, const char *name, linked_list_t *list)
{
	enumerator_t *enumerator;
	traffic_selector_t *ts;
	bool first = TRUE;

	put(b, ",\"%s\":[", name);
	if (list)
	{
		enumerator = list->create_enumerator(list);
		while (enumerator->enumerate(enumerator, &ts))
		{
			put(b, first ? "" : ",");
			put_ts(b, ts);
			first = FALSE;
		}
		enumerator->destroy(enumerator);
	}
	put(b, "]");
}

static void put_lifetime(buf_t *b, lifetime_cfg_t *l)
{
	if (!l)
	{
		put(b, ",\"lifetime\":null");
		return;
	}
	put(b, ",\"lifetime\":{\"time\":[%llu,%llu],\"bytes\":[%llu,%llu],\"packets\":[%llu,%llu]}",
		(unsigned long long)l->time.rekey, (unsigned long long)l->time.life,
		(unsigned long long)l->bytes.rekey, (unsigned long long)l->bytes.life,
		(unsigned long long)l->packets.rekey, (unsigned long long)l->packets.life);
}

static int connect_to(char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(addr.sun_path))
	{
		DBG1(DBG_KNL, "p4sec: socket path %s is too long", path);
		return -1;
	}
	strcpy(addr.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0)
	{
		return -1;
	}
	if (connect(fd, (struct sockaddr*)&addr, sizeof(addr)) < 0)
	{
		DBG1(DBG_KNL, "p4sec: cannot reach the p4sec controller at %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static bool write_all(int fd, char *s, size_t len)
{
	ssize_t n;

	while (len)
	{
		n = write(fd, s, len);
		if (n <= 0)
		{
			if (n < 0 && errno == EINTR)
			{
				continue;
			}
			return FALSE;
		}
		s += n;
		len -= n;
	}
	return TRUE;
}

/* one line from fd into a new string (without the newline), NULL when the connection ends */
static char *read_line(int fd)
{
	char *line = malloc(LINE_MAX_LEN);
	size_t len = 0;
	ssize_t n;

	while (len < LINE_MAX_LEN - 1)
	{
		n = read(fd, line + len, 1);
		if (n < 0 && errno == EINTR)
		{
			continue;
		}
		if (n <= 0)
		{
			free(line);
			return NULL;
		}
		if (line[len] == '\n')
		{
			line[len] = '\0';
			return line;
		}
		len++;
	}
	free(line);
	return NULL;
}

/* the number after "name": in a one-line answer */
static bool answer_u64(char *answer, const char *name, uint64_t *value)
{
	char key[64], *at;

	snprintf(key, sizeof(key), "\"%s\":", name);
	at = strstr(answer, key);
	if (!at)
	{
		return FALSE;
	}
	*value = strtoull(at + strlen(key), NULL, 10);
	return TRUE;
}

/* on the first connection of this charon: the controller removes the IKE SAs an earlier charon of this gateway
 * left (a new charon holds none of them) */
static bool announce(private_p4sec_ipsec_t *this)
{
	char hello[256], *line;
	bool ok;

	snprintf(hello, sizeof(hello), "{\"op\":\"charon_start\",\"gw\":\"%s\"}\n", this->gateway);
	if (!write_all(this->fd, hello, strlen(hello)))
	{
		return FALSE;
	}
	line = read_line(this->fd);
	ok = line && strstr(line, "\"ok\":true");
	if (line && !ok)
	{
		DBG1(DBG_KNL, "p4sec: the p4sec controller refused this charon: %s", line);
	}
	free(line);
	this->announced = ok;
	return ok;
}

/* send the request in b (freed), wait for the answer; SUCCESS and the answer (to free) if it says ok */
static status_t request(private_p4sec_ipsec_t *this, buf_t *b, char **answer)
{
	char *line = NULL;
	int attempt;

	put(b, "}\n");
	this->mutex->lock(this->mutex);
	for (attempt = 0; attempt < 2 && !line; attempt++)
	{
		if (this->fd < 0)
		{
			this->fd = connect_to(this->path);
			if (this->fd < 0)
			{
				break;
			}
			if (!this->announced && !announce(this))
			{
				close(this->fd);
				this->fd = -1;
				break;
			}
		}
		if (write_all(this->fd, b->s, b->len))
		{
			line = read_line(this->fd);
		}
		if (!line)
		{
			close(this->fd);
			this->fd = -1;
		}
	}
	this->mutex->unlock(this->mutex);
	if (!line)
	{
		DBG1(DBG_KNL, "p4sec: no answer from the p4sec controller at %s to %.80s", this->path, b->s);
		free(b->s);
		return FAILED;
	}
	free(b->s);
	if (!strstr(line, "\"ok\":true"))
	{
		DBG1(DBG_KNL, "p4sec: the p4sec controller refused: %s", line);
		free(line);
		return FAILED;
	}
	if (answer)
	{
		*answer = line;
	}
	else
	{
		free(line);
	}
	return SUCCESS;
}

METHOD(kernel_ipsec_t, get_features, kernel_feature_t,
	private_p4sec_ipsec_t *this)
{
	return 0;
}

METHOD(kernel_ipsec_t, get_spi, status_t,
	private_p4sec_ipsec_t *this, host_t *src, host_t *dst, uint8_t protocol, uint32_t *spi)
{
	buf_t b;
	char *answer;
	uint64_t value;

	begin(&b, this, "get_spi");
	put_host(&b, "src", src);
	put_host(&b, "dst", dst);
	put(&b, ",\"proto\":%u", protocol);
	if (request(this, &b, &answer) != SUCCESS)
	{
		return FAILED;
	}
	if (!answer_u64(answer, "spi", &value))
	{
		free(answer);
		return FAILED;
	}
	free(answer);
	*spi = htonl((uint32_t)value);
	return SUCCESS;
}

METHOD(kernel_ipsec_t, get_cpi, status_t,
	private_p4sec_ipsec_t *this, host_t *src, host_t *dst, uint16_t *cpi)
{
	DBG1(DBG_KNL, "p4sec: IPComp is not supported by the p4sec gateway");
	return NOT_SUPPORTED;
}

static void put_id(buf_t *b, kernel_ipsec_sa_id_t *id)
{
	put_host(b, "src", id->src);
	put_host(b, "dst", id->dst);
	put(b, ",\"spi\":%u,\"proto\":%u", ntohl(id->spi), id->proto);
}

METHOD(kernel_ipsec_t, add_sa, status_t,
	private_p4sec_ipsec_t *this, kernel_ipsec_sa_id_t *id, kernel_ipsec_add_sa_t *data)
{
	buf_t b;

	begin(&b, this, "add_sa");
	put_id(&b, id);
	put(&b, ",\"reqid\":%u,\"mode\":%u,\"enc_alg\":%u,\"int_alg\":%u", data->reqid, data->mode, data->enc_alg,
		data->int_alg);
	put_hex(&b, "enc_key", data->enc_key);
	put_hex(&b, "int_key", data->int_key);
	put(&b, ",\"replay_window\":%u,\"tfc\":%u,\"ipcomp\":%u,\"encap\":%s,\"esn\":%s,\"initiator\":%s,"
		"\"inbound\":%s,\"update\":%s,\"mark\":%u", data->replay_window, data->tfc, data->ipcomp,
		data->encap ? "true" : "false", data->esn ? "true" : "false", data->initiator ? "true" : "false",
		data->inbound ? "true" : "false", data->update ? "true" : "false", id->mark.value);
	put_lifetime(&b, data->lifetime);
	put_ts_list(&b, "src_ts", data->src_ts);
	put_ts_list(&b, "dst_ts", data->dst_ts);
	return request(this, &b, NULL);
}

METHOD(kernel_ipsec_t, update_sa, status_t,
	private_p4sec_ipsec_t *this, kernel_ipsec_sa_id_t *id, kernel_ipsec_update_sa_t *data)
{
	buf_t b;

	begin(&b, this, "update_sa");
	put_id(&b, id);
	put_host(&b, "new_src", data->new_src);
	put_host(&b, "new_dst", data->new_dst);
	put(&b, ",\"encap\":%s,\"new_encap\":%s", data->encap ? "true" : "false", data->new_encap ? "true" : "false");
	/* the controller refuses to move an SA (its sequence numbers would restart under the same keys): NOT_SUPPORTED
	 * makes charon rekey the CHILD_SA with the new addresses instead */
	return request(this, &b, NULL) == SUCCESS ? SUCCESS : NOT_SUPPORTED;
}

METHOD(kernel_ipsec_t, query_sa, status_t,
	private_p4sec_ipsec_t *this, kernel_ipsec_sa_id_t *id, kernel_ipsec_query_sa_t *data,
	uint64_t *bytes, uint64_t *packets, time_t *time)
{
	buf_t b;
	char *answer;
	uint64_t value;

	begin(&b, this, "query_sa");
	put_id(&b, id);
	if (request(this, &b, &answer) != SUCCESS)
	{
		return FAILED;
	}
	if (bytes && answer_u64(answer, "bytes", &value))
	{
		*bytes = value;
	}
	if (packets && answer_u64(answer, "packets", &value))
	{
		*packets = value;
	}
	if (time)
	{
		/* seconds since the SA last carried a packet; none yet: 0 (never used) */
		*time = 0;
		if (answer_u64(answer, "idle", &value) && !strstr(answer, "\"idle\":null"))
		{
			*time = time_monotonic(NULL) - value;
		}
	}
	free(answer);
	return SUCCESS;
}

METHOD(kernel_ipsec_t, del_sa, status_t,
	private_p4sec_ipsec_t *this, kernel_ipsec_sa_id_t *id, kernel_ipsec_del_sa_t *data)
{
	buf_t b;

	begin(&b, this, "del_sa");
	put_id(&b, id);
	return request(this, &b, NULL);
}

METHOD(kernel_ipsec_t, flush_sas, status_t,
	private_p4sec_ipsec_t *this)
{
	buf_t b;

	begin(&b, this, "flush_sas");
	return request(this, &b, NULL);
}

static void put_policy(buf_t *b, kernel_ipsec_policy_id_t *id, kernel_ipsec_manage_policy_t *data)
{
	put(b, ",\"dir\":%u,\"src_ts\":", id->dir);
	put_ts(b, id->src_ts);
	put(b, ",\"dst_ts\":");
	put_ts(b, id->dst_ts);
	put(b, ",\"type\":%u,\"prio\":%u", data->type, data->prio);
	put_host(b, "src", data->src);
	put_host(b, "dst", data->dst);
	if (data->sa)
	{
		put(b, ",\"reqid\":%u,\"mode\":%u,\"esp_spi\":%u", data->sa->reqid, data->sa->mode,
			data->sa->esp.use ? ntohl(data->sa->esp.spi) : 0);
	}
}

METHOD(kernel_ipsec_t, add_policy, status_t,
	private_p4sec_ipsec_t *this, kernel_ipsec_policy_id_t *id, kernel_ipsec_manage_policy_t *data)
{
	buf_t b;

	begin(&b, this, "add_policy");
	put_policy(&b, id, data);
	return request(this, &b, NULL);
}

METHOD(kernel_ipsec_t, query_policy, status_t,
	private_p4sec_ipsec_t *this, kernel_ipsec_policy_id_t *id, kernel_ipsec_query_policy_t *data,
	time_t *use_time)
{
	return NOT_SUPPORTED;
}

METHOD(kernel_ipsec_t, del_policy, status_t,
	private_p4sec_ipsec_t *this, kernel_ipsec_policy_id_t *id, kernel_ipsec_manage_policy_t *data)
{
	buf_t b;

	begin(&b, this, "del_policy");
	put_policy(&b, id, data);
	return request(this, &b, NULL);
}

METHOD(kernel_ipsec_t, flush_policies, status_t,
	private_p4sec_ipsec_t *this)
{
	buf_t b;

	begin(&b, this, "flush_policies");
	return request(this, &b, NULL);
}

METHOD(kernel_ipsec_t, bypass_socket, bool,
	private_p4sec_ipsec_t *this, int fd, int family)
{
	/* IKE never meets the gateway's policies: the gateway forwards it to charon's port as bypass traffic */
	return TRUE;
}

METHOD(kernel_ipsec_t, enable_udp_decap, bool,
	private_p4sec_ipsec_t *this, int fd, int family, uint16_t port)
{
	/* the gateway decapsulates ESP in UDP itself; charon's socket sees IKE (non-ESP marker) only */
	return TRUE;
}

/* lifetime events from the controller: {"event":"expire","proto":50,"spi":N,"dst":"ADDR","hard":0|1} */
static void *read_events(private_p4sec_ipsec_t *this)
{
	char *line, sub[256], dst[INET6_ADDRSTRLEN + 1], *at;
	uint64_t spi, proto, hard;
	host_t *host;
	size_t i;

	thread_cancelability(FALSE);
	while (TRUE)
	{
		if (this->event_fd < 0)
		{
			this->event_fd = connect_to(this->path);
			if (this->event_fd >= 0)
			{
				snprintf(sub, sizeof(sub), "{\"op\":\"subscribe\",\"gw\":\"%s\"}\n", this->gateway);
				if (!write_all(this->event_fd, sub, strlen(sub)))
				{
					close(this->event_fd);
					this->event_fd = -1;
				}
			}
			if (this->event_fd < 0)
			{
				thread_cancelability(TRUE);
				sleep(1);
				thread_cancelability(FALSE);
				continue;
			}
		}
		thread_cancelability(TRUE);
		line = read_line(this->event_fd);
		thread_cancelability(FALSE);
		if (!line)
		{
			close(this->event_fd);
			this->event_fd = -1;
			continue;
		}
		at = strstr(line, "\"dst\":\"");
		if (strstr(line, "\"event\":\"expire\"") && at && answer_u64(line, "spi", &spi) &&
			answer_u64(line, "proto", &proto) && answer_u64(line, "hard", &hard))
		{
			at += strlen("\"dst\":\"");
			for (i = 0; at[i] && at[i] != '"' && i < sizeof(dst) - 1; i++)
			{
				dst[i] = at[i];
			}
			dst[i] = '\0';
			host = host_create_from_string(dst, 0);
			if (host)
			{
				DBG1(DBG_KNL, "p4sec: %s lifetime of SA %.8x reached on the p4sec gateway",
					 hard ? "hard" : "soft", (uint32_t)spi);
				charon->kernel->expire(charon->kernel, (uint8_t)proto, htonl((uint32_t)spi), host, hard != 0);
				host->destroy(host);
			}
		}
		free(line);
	}
	return NULL;
}

METHOD(kernel_ipsec_t, destroy, void,
	private_p4sec_ipsec_t *this)
{
	if (this->events)
	{
		this->events->cancel(this->events);
		this->events->join(this->events);
	}
	if (this->fd >= 0)
	{
		close(this->fd);
	}
	if (this->event_fd >= 0)
	{
		close(this->event_fd);
	}
	this->mutex->destroy(this->mutex);
	free(this->path);
	free(this->gateway);
	free(this);
}

kernel_ipsec_t *p4sec_ipsec_create()
{
	private_p4sec_ipsec_t *this;

	INIT(this,
		.public = {
			.get_features = _get_features,
			.get_spi = _get_spi,
			.get_cpi = _get_cpi,
			.add_sa = _add_sa,
			.update_sa = _update_sa,
			.query_sa = _query_sa,
			.del_sa = _del_sa,
			.flush_sas = _flush_sas,
			.add_policy = _add_policy,
			.query_policy = _query_policy,
			.del_policy = _del_policy,
			.flush_policies = _flush_policies,
			.bypass_socket = _bypass_socket,
			.enable_udp_decap = _enable_udp_decap,
			.destroy = _destroy,
		},
		.path = strdup(lib->settings->get_str(lib->settings, "%s.plugins.p4sec.socket", DEFAULT_SOCKET, lib->ns)),
		.gateway = strdup(lib->settings->get_str(lib->settings, "%s.plugins.p4sec.gateway", "", lib->ns)),
		.fd = -1,
		.event_fd = -1,
		.mutex = mutex_create(MUTEX_TYPE_DEFAULT),
	);
	if (!this->gateway[0] || strchr(this->gateway, '"') || strchr(this->gateway, '\\'))
	{
		DBG1(DBG_KNL, "p4sec: charon.plugins.p4sec.gateway must name the p4sec gateway (as the controller "
			 "knows it, without quotes or backslashes)");
		destroy(this);
		return NULL;
	}
	this->events = thread_create((thread_main_t)read_events, this);
	DBG1(DBG_KNL, "p4sec: SAs and policies go to the p4sec controller at %s for gateway %s", this->path,
		 this->gateway);
	return &this->public;
}
