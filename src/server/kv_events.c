/* KV-cache events in vLLM's wire format (vllm/distributed/kv_events.py,
 * vLLM 0.34), for prefix-aware routers (vllm-router's kv_aware, llm-d's
 * KV indexer, Dynamo's vLLM publisher bridge).
 *
 * A ZeroMQ PUB socket (bound) sends one message per engine step that
 * changed the prefix cache: frames [topic, sequence number as 8 bytes big-
 * endian (0, 1, ...), msgpack payload]. The payload is an EventBatch, an
 * array [timestamp (float64 seconds), [events...], data_parallel_rank (0)];
 * each event a map tagged by "type" (msgspec's tag=True, the form vLLM
 * sends since its map event format):
 *   {"type": "BlockStored", "block_hashes": [h], "parent_block_hash": p|nil,
 *    "token_ids": [block_size ids], "block_size": n, "lora_id": nil,
 *    "medium": "GPU", "lora_name": nil}
 *   {"type": "BlockRemoved", "block_hashes": [h], "medium": "GPU"}
 *   {"type": "AllBlocksCleared"}
 * Hashes are unsigned 64-bit integers (vLLM's default int form; consumers
 * rebuild their own keys from token_ids and use these as opaque ids).
 * "GPU" is vLLM's name for the engine's primary KV cache, which routers
 * weigh fully; ferrox's is in host memory, but it is that tier.
 *
 * An optional ROUTER socket replays: a request [id, "", start (8 bytes
 * BE)] is answered with every buffered batch from start on, [id, "",
 * topic, seq, payload], then [id, "", "", -1 (8 bytes), ""].
 *
 * Threads: the engine thread encodes (srv_kvev_collect) and queues; one
 * publisher thread owns both sockets. PUB never blocks (a subscriber that
 * does not read loses messages at the high-water mark, as with vLLM), and
 * the queue between the two threads is bounded (oldest batch dropped), so
 * a stalled subscriber cannot slow decoding. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <msgpack.h>
#include <zmq.h>

#include "server/server.h"

struct kvev_msg {
	uint64_t seq;
	char *data; /* msgpack payload, malloc'ed */
	size_t n;
	struct kvev_msg *next;
};

struct srv_kvev {
	struct srv_kvev_params p;
	char *topic, *endpoint, *replay_endpoint; /* owned copies */
	void *zctx, *pub, *replay;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	/* lock */
	struct kvev_msg *q_head, *q_tail; /* encoded, not yet sent */
	int32_t n_queued;
	bool stop;
	uint64_t next_seq;
	uint64_t published, dropped;      /* batches */
	uint64_t n_events;                /* events encoded */
	/* publisher thread */
	struct kvev_msg **ring;           /* [buffer_steps] sent batches, for replay */
	int32_t ring_head, ring_n;
	/* engine thread */
	msgpack_sbuffer ev;               /* this step's events, packed */
	int32_t ev_n;
	bool ev_failed;                   /* allocation failed while packing */
};

static void kvev_msg_free(struct kvev_msg *m)
{
	if (m) {
		free(m->data);
		free(m);
	}
}

/* msgpack-c's packer writes through this; an allocation failure is kept
 * in ev_failed (the batch is then replaced by AllBlocksCleared). */
static int ev_write(void *data, const char *buf, size_t len)
{
	struct srv_kvev *k = data;
	msgpack_sbuffer *sb = &k->ev;
	if (sb->size + len > sb->alloc) {
		size_t c = sb->alloc ? sb->alloc : 8192;
		while (c < sb->size + len)
			c *= 2;
		char *p = realloc(sb->data, c);
		if (!p) {
			k->ev_failed = true;
			return -1;
		}
		sb->data = p;
		sb->alloc = c;
	}
	memcpy(sb->data + sb->size, buf, len);
	sb->size += len;
	return 0;
}

static void pack_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

static void on_event(void *arg, const struct fx_kv_event *e)
{
	struct srv_kvev *k = arg;
	msgpack_packer pk;
	msgpack_packer_init(&pk, k, ev_write);
	switch (e->kind) {
	case FX_KV_EVENT_STORED:
		msgpack_pack_map(&pk, 8);
		pack_str(&pk, "type");
		pack_str(&pk, "BlockStored");
		pack_str(&pk, "block_hashes");
		msgpack_pack_array(&pk, 1);
		msgpack_pack_uint64(&pk, e->hash);
		pack_str(&pk, "parent_block_hash");
		if (e->parent)
			msgpack_pack_uint64(&pk, e->parent);
		else
			msgpack_pack_nil(&pk);
		pack_str(&pk, "token_ids");
		msgpack_pack_array(&pk, (size_t)e->n_tokens);
		for (int32_t i = 0; i < e->n_tokens; i++)
			msgpack_pack_int32(&pk, e->tokens[i]);
		pack_str(&pk, "block_size");
		msgpack_pack_int32(&pk, e->n_tokens);
		pack_str(&pk, "lora_id");
		msgpack_pack_nil(&pk);
		pack_str(&pk, "medium");
		pack_str(&pk, "GPU");
		pack_str(&pk, "lora_name");
		msgpack_pack_nil(&pk);
		break;
	case FX_KV_EVENT_REMOVED:
		msgpack_pack_map(&pk, 3);
		pack_str(&pk, "type");
		pack_str(&pk, "BlockRemoved");
		pack_str(&pk, "block_hashes");
		msgpack_pack_array(&pk, 1);
		msgpack_pack_uint64(&pk, e->hash);
		pack_str(&pk, "medium");
		pack_str(&pk, "GPU");
		break;
	default:
		msgpack_pack_map(&pk, 1);
		pack_str(&pk, "type");
		pack_str(&pk, "AllBlocksCleared");
		break;
	}
	k->ev_n++;
}

/* The EventBatch around the packed events: [ts, [events...], 0]. */
static struct kvev_msg *batch_msg(struct srv_kvev *k)
{
	struct kvev_msg *m = calloc(1, sizeof(*m));
	msgpack_sbuffer head;
	msgpack_sbuffer_init(&head);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &head, msgpack_sbuffer_write);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	bool ok = m && !msgpack_pack_array(&pk, 3) &&
		  !msgpack_pack_double(&pk, (double)ts.tv_sec + ts.tv_nsec * 1e-9) &&
		  !msgpack_pack_array(&pk, (size_t)k->ev_n);
	size_t n = head.size + k->ev.size + 1;
	char *d = ok ? malloc(n) : NULL;
	if (!d) {
		msgpack_sbuffer_destroy(&head);
		free(m);
		return NULL;
	}
	memcpy(d, head.data, head.size);
	memcpy(d + head.size, k->ev.data, k->ev.size);
	d[n - 1] = 0x00; /* data_parallel_rank: positive fixint 0 */
	msgpack_sbuffer_destroy(&head);
	m->data = d;
	m->n = n;
	return m;
}

bool srv_kvev_collect(struct srv_kvev *k, struct fx_context *ctx)
{
	if (!k)
		return false;
	k->ev.size = 0;
	k->ev_n = 0;
	k->ev_failed = false;
	if (fx_context_kv_events(ctx, on_event, k) == 0)
		return false;
	struct kvev_msg *m = k->ev_failed ? NULL : batch_msg(k);
	if (!m) {
		/* Out of memory: tell consumers to forget this replica's blocks
		 * (it then holds some unannounced: never the reverse). */
		k->ev.size = 0;
		k->ev_n = 0;
		k->ev_failed = false;
		on_event(k, &(struct fx_kv_event){ .kind = FX_KV_EVENT_CLEARED });
		m = k->ev_failed ? NULL : batch_msg(k);
	}
	pthread_mutex_lock(&k->lock);
	if (!m) {
		k->dropped++;
	} else {
		m->seq = k->next_seq++;
		if (k->q_tail)
			k->q_tail->next = m;
		else
			k->q_head = m;
		k->q_tail = m;
		k->n_events += (uint64_t)k->ev_n;
		if (++k->n_queued > k->p.max_queue) { /* the publisher fell behind */
			struct kvev_msg *old = k->q_head;
			k->q_head = old->next;
			k->n_queued--;
			k->dropped++;
			kvev_msg_free(old);
		}
	}
	pthread_mutex_unlock(&k->lock);
	return true;
}

static void seq_bytes(uint64_t seq, unsigned char out[8])
{
	for (int i = 0; i < 8; i++)
		out[i] = (unsigned char)(seq >> (56 - 8 * i));
}

static void send_batch(struct srv_kvev *k, const struct kvev_msg *m)
{
	unsigned char sq[8];
	seq_bytes(m->seq, sq);
	/* DONTWAIT: a PUB socket drops at the high-water mark rather than
	 * block; the flag keeps that true whatever the socket's state. */
	zmq_send(k->pub, k->topic, strlen(k->topic), ZMQ_SNDMORE | ZMQ_DONTWAIT);
	zmq_send(k->pub, sq, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
	zmq_send(k->pub, m->data, m->n, ZMQ_DONTWAIT);
}

/* Keep m for replays (the ring owns it; the oldest goes). */
static void ring_keep(struct srv_kvev *k, struct kvev_msg *m)
{
	int32_t cap = k->p.buffer_steps;
	if (!k->ring) {
		kvev_msg_free(m);
		return;
	}
	int32_t at = (k->ring_head + k->ring_n) % cap;
	if (k->ring_n == cap) {
		kvev_msg_free(k->ring[k->ring_head]);
		k->ring_head = (k->ring_head + 1) % cap;
		k->ring_n--;
		at = (k->ring_head + k->ring_n) % cap;
	}
	m->next = NULL;
	k->ring[at] = m;
	k->ring_n++;
}

/* One replay request on the ROUTER socket: [id, "", start]. */
static void serve_replay(struct srv_kvev *k)
{
	zmq_msg_t part[3];
	int n = 0, more = 1;
	while (more) {
		zmq_msg_t t;
		zmq_msg_init(&t);
		if (zmq_msg_recv(&t, k->replay, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&t);
			break;
		}
		more = zmq_msg_more(&t);
		if (n < 3)
			part[n++] = t;
		else
			zmq_msg_close(&t);
	}
	if (n == 3 && zmq_msg_size(&part[1]) == 0 && zmq_msg_size(&part[2]) == 8) {
		const unsigned char *b = zmq_msg_data(&part[2]);
		uint64_t start = 0;
		for (int i = 0; i < 8; i++)
			start = start << 8 | b[i];
		const void *id = zmq_msg_data(&part[0]);
		size_t idn = zmq_msg_size(&part[0]);
		unsigned char sq[8];
		for (int32_t i = 0; i < k->ring_n; i++) {
			const struct kvev_msg *m = k->ring[(k->ring_head + i) % k->p.buffer_steps];
			if (m->seq < start)
				continue;
			seq_bytes(m->seq, sq);
			zmq_send(k->replay, id, idn, ZMQ_SNDMORE | ZMQ_DONTWAIT);
			zmq_send(k->replay, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
			zmq_send(k->replay, k->topic, strlen(k->topic), ZMQ_SNDMORE | ZMQ_DONTWAIT);
			zmq_send(k->replay, sq, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
			zmq_send(k->replay, m->data, m->n, ZMQ_DONTWAIT);
		}
		memset(sq, 0xff, 8); /* -1: the end of the replay */
		zmq_send(k->replay, id, idn, ZMQ_SNDMORE | ZMQ_DONTWAIT);
		zmq_send(k->replay, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
		zmq_send(k->replay, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
		zmq_send(k->replay, sq, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
		zmq_send(k->replay, "", 0, ZMQ_DONTWAIT);
	}
	for (int i = 0; i < n; i++)
		zmq_msg_close(&part[i]);
}

static void *publisher_main(void *arg)
{
	struct srv_kvev *k = arg;
	for (;;) {
		pthread_mutex_lock(&k->lock);
		struct kvev_msg *m = k->q_head;
		bool stop = k->stop;
		k->q_head = k->q_tail = NULL;
		k->n_queued = 0;
		pthread_mutex_unlock(&k->lock);
		uint64_t sent = 0;
		while (m) {
			struct kvev_msg *next = m->next;
			send_batch(k, m);
			ring_keep(k, m);
			sent++;
			m = next;
		}
		if (sent) {
			pthread_mutex_lock(&k->lock);
			k->published += sent;
			pthread_mutex_unlock(&k->lock);
		}
		if (stop)
			break;
		/* Wait for a replay request, or 10 ms: the next batch waits at
		 * most that long. */
		zmq_pollitem_t it = { .socket = k->replay, .events = ZMQ_POLLIN };
		if (k->replay) {
			if (zmq_poll(&it, 1, 10) > 0)
				serve_replay(k);
		} else {
			nanosleep(&(struct timespec){ .tv_nsec = 10000000L }, NULL);
		}
	}
	return NULL;
}

static char *dup_str(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = malloc(n);
	if (d)
		memcpy(d, s, n);
	return d;
}

static int bind_or_say(void *sock, const char *ep, const char *what, char *why, size_t nwhy)
{
	if (zmq_bind(sock, ep) == 0)
		return 0;
	snprintf(why, nwhy, "cannot bind the KV-events %s socket to '%s': %s (an endpoint "
		 "such as tcp://*:5557 or tcp://127.0.0.1:5557 that is free)", what, ep,
		 zmq_strerror(zmq_errno()));
	return -1;
}

int srv_kvev_start(const struct srv_kvev_params *p, struct srv_kvev **out, char *why, size_t nwhy)
{
	*out = NULL;
	struct srv_kvev *k = calloc(1, sizeof(*k));
	if (!k) {
		snprintf(why, nwhy, "out of memory");
		return FX_E_NOMEM;
	}
	k->p = *p;
	if (k->p.buffer_steps < 1)
		k->p.buffer_steps = 1;
	if (k->p.max_queue < 1)
		k->p.max_queue = 1;
	pthread_mutex_init(&k->lock, NULL);
	k->topic = dup_str(p->topic ? p->topic : "");
	k->endpoint = dup_str(p->endpoint);
	k->replay_endpoint = p->replay_endpoint ? dup_str(p->replay_endpoint) : NULL;
	k->ring = p->replay_endpoint ? calloc((size_t)k->p.buffer_steps, sizeof(*k->ring)) : NULL;
	k->zctx = zmq_ctx_new();
	int rc = FX_E_NOMEM;
	if (!k->topic || !k->endpoint || (p->replay_endpoint && (!k->replay_endpoint || !k->ring)) ||
	    !k->zctx || !(k->pub = zmq_socket(k->zctx, ZMQ_PUB))) {
		snprintf(why, nwhy, "out of memory starting the KV-events publisher");
		goto fail;
	}
	int hwm = p->hwm > 0 ? p->hwm : 100000, linger = 0;
	zmq_setsockopt(k->pub, ZMQ_SNDHWM, &hwm, sizeof(hwm));
	zmq_setsockopt(k->pub, ZMQ_LINGER, &linger, sizeof(linger));
	rc = FX_E_IO;
	if (bind_or_say(k->pub, k->endpoint, "PUB", why, nwhy))
		goto fail;
	if (k->replay_endpoint) {
		int rhwm = 2 * (k->p.buffer_steps + 1);
		if (!(k->replay = zmq_socket(k->zctx, ZMQ_ROUTER))) {
			snprintf(why, nwhy, "cannot make the KV-events replay socket: %s",
				 zmq_strerror(zmq_errno()));
			goto fail;
		}
		zmq_setsockopt(k->replay, ZMQ_SNDHWM, &rhwm, sizeof(rhwm));
		zmq_setsockopt(k->replay, ZMQ_LINGER, &linger, sizeof(linger));
		if (bind_or_say(k->replay, k->replay_endpoint, "replay (ROUTER)", why, nwhy))
			goto fail;
	}
	if (pthread_create(&k->thread, NULL, publisher_main, k)) {
		snprintf(why, nwhy, "cannot start the KV-events publisher thread");
		goto fail;
	}
	k->started = true;
	*out = k;
	return FX_OK;
fail:
	srv_kvev_stop(k);
	return rc;
}

void srv_kvev_stats(struct srv_kvev *k, uint64_t *published, uint64_t *dropped,
		    uint64_t *events, uint64_t *next_seq)
{
	pthread_mutex_lock(&k->lock);
	*published = k->published;
	*dropped = k->dropped;
	*events = k->n_events;
	*next_seq = k->next_seq;
	pthread_mutex_unlock(&k->lock);
}

void srv_kvev_stop(struct srv_kvev *k)
{
	if (!k)
		return;
	if (k->started) {
		pthread_mutex_lock(&k->lock);
		k->stop = true;
		pthread_mutex_unlock(&k->lock);
		pthread_join(k->thread, NULL); /* sends what is queued first */
	}
	for (struct kvev_msg *m = k->q_head, *n; m; m = n) {
		n = m->next;
		kvev_msg_free(m);
	}
	for (int32_t i = 0; k->ring && i < k->ring_n; i++)
		kvev_msg_free(k->ring[(k->ring_head + i) % k->p.buffer_steps]);
	free(k->ring);
	if (k->pub)
		zmq_close(k->pub);
	if (k->replay)
		zmq_close(k->replay);
	if (k->zctx)
		zmq_ctx_term(k->zctx);
	free(k->ev.data);
	free(k->topic);
	free(k->endpoint);
	free(k->replay_endpoint);
	pthread_mutex_destroy(&k->lock);
	free(k);
}

/* A string field of the config (NULL when absent); false when it has
 * another type. */
static bool cfg_str(const cJSON *o, const char *key, const char **out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v || cJSON_IsNull(v))
		return true;
	if (!cJSON_IsString(v))
		return false;
	*out = v->valuestring;
	return true;
}

static bool cfg_int(const cJSON *o, const char *key, int32_t lo, int32_t hi, int32_t *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v || cJSON_IsNull(v))
		return true;
	if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int64_t)v->valuedouble ||
	    v->valuedouble < lo || v->valuedouble > hi)
		return false;
	*out = (int32_t)v->valuedouble;
	return true;
}

int srv_kvev_open(const struct fx_server_params *p, struct srv_kvev **out, char *why, size_t nwhy)
{
	*out = NULL;
	struct srv_kvev_params kp = { .endpoint = "tcp://*:5557", .buffer_steps = 10000,
				      .hwm = 100000, .max_queue = 100000, .topic = "" };
	bool on = p->kv_events_endpoint != NULL;
	cJSON *cfg = NULL;
	if (p->kv_events_config) {
		cfg = cJSON_Parse(p->kv_events_config);
		if (!cJSON_IsObject(cfg)) {
			cJSON_Delete(cfg);
			snprintf(why, nwhy, "--kv-events-config is not a JSON object (vLLM's keys: "
				 "enable_kv_cache_events, publisher, endpoint, replay_endpoint, "
				 "buffer_steps, hwm, max_queue_size, topic)");
			return FX_E_INVALID;
		}
		const cJSON *en = cJSON_GetObjectItemCaseSensitive(cfg, "enable_kv_cache_events");
		const char *pub = NULL;
		bool ok = (!en || cJSON_IsBool(en)) && cfg_str(cfg, "publisher", &pub) &&
			  cfg_str(cfg, "endpoint", &kp.endpoint) &&
			  cfg_str(cfg, "replay_endpoint", &kp.replay_endpoint) &&
			  cfg_str(cfg, "topic", &kp.topic) &&
			  cfg_int(cfg, "buffer_steps", 1, 1 << 20, &kp.buffer_steps) &&
			  cfg_int(cfg, "hwm", 0, 1 << 30, &kp.hwm) &&
			  cfg_int(cfg, "max_queue_size", 1, 1 << 24, &kp.max_queue);
		if (!ok) {
			cJSON_Delete(cfg);
			snprintf(why, nwhy, "--kv-events-config: a field has the wrong type or range "
				 "(enable_kv_cache_events a boolean; publisher, endpoint, "
				 "replay_endpoint and topic strings; buffer_steps, hwm and "
				 "max_queue_size positive integers)");
			return FX_E_INVALID;
		}
		if (pub && strcmp(pub, "zmq") && strcmp(pub, "null")) {
			snprintf(why, nwhy, "--kv-events-config: publisher '%.32s': ferrox has \"zmq\" "
				 "(and \"null\": off)", pub);
			cJSON_Delete(cfg);
			return FX_E_UNSUPPORTED;
		}
		/* vLLM: enabled, and the publisher zmq or unset */
		on = on || (cJSON_IsTrue(en) && (!pub || !strcmp(pub, "zmq")));
	}
	if (p->kv_events_endpoint)
		kp.endpoint = p->kv_events_endpoint;
	if (p->kv_events_replay)
		kp.replay_endpoint = p->kv_events_replay;
	if (p->kv_events_topic)
		kp.topic = p->kv_events_topic;
	int rc = on ? srv_kvev_start(&kp, out, why, nwhy) : FX_OK;
	cJSON_Delete(cfg);
	return rc;
}

const char *srv_kvev_endpoint(const struct srv_kvev *k, bool replay)
{
	return replay ? k->replay_endpoint : k->endpoint;
}

const char *srv_kvev_topic(const struct srv_kvev *k)
{
	return k->topic;
}

/* A wildcard endpoint (tcp, host "*") as a subscriber elsewhere reaches it: the wildcard
 * replaced by host (the HTTP server's address; 127.0.0.1 for a wildcard
 * one). */
static cJSON *reachable(const char *ep, const char *host)
{
	const char *star = ep ? strstr(ep, "://*:") : NULL;
	if (!ep)
		return cJSON_CreateNull();
	if (!star)
		return cJSON_CreateString(ep);
	if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::"))
		host = "127.0.0.1";
	char buf[512];
	snprintf(buf, sizeof(buf), "%.*s://%s%s%s:%s", (int)(star - ep), ep, strchr(host, ':') ? "[" : "",
		 host, strchr(host, ':') ? "]" : "", star + 5);
	return cJSON_CreateString(buf);
}

cJSON *srv_kv_event_sources_json(const struct srv *s)
{
	cJSON *a = cJSON_CreateArray();
	if (!a || !s->kvev)
		return a;
	cJSON *o = cJSON_CreateObject();
	if (!o || !cJSON_AddItemToArray(a, o)) { /* a does not own o yet */
		cJSON_Delete(o);
		cJSON_Delete(a);
		return NULL;
	}
	if (!cJSON_AddNumberToObject(o, "data_parallel_rank", 0) ||
	    !cJSON_AddItemToObject(o, "endpoint", reachable(s->kvev->endpoint, s->p.host)) ||
	    !cJSON_AddItemToObject(o, "replay_endpoint",
				   reachable(s->kvev->replay_endpoint, s->p.host)) ||
	    !cJSON_AddStringToObject(o, "topic", s->kvev->topic)) {
		cJSON_Delete(a);
		return NULL;
	}
	return a;
}

cJSON *srv_kv_blocks_json(struct srv *s)
{
	cJSON *o = cJSON_CreateObject(), *h = cJSON_CreateArray();
	if (!o || !h || !cJSON_AddItemToObject(o, "hashes", h)) {
		cJSON_Delete(o);
		cJSON_Delete(h);
		return NULL;
	}
	uint64_t pub = 0, drop = 0, nev = 0, next = 0;
	if (s->kvev)
		srv_kvev_stats(s->kvev, &pub, &drop, &nev, &next);
	bool ok = cJSON_AddNumberToObject(o, "block_size", s->block_size) &&
		  cJSON_AddNumberToObject(o, "events", (double)nev) &&
		  cJSON_AddNumberToObject(o, "batches_dropped", (double)drop);
	pthread_mutex_lock(&s->lock);
	/* seq: the batches queued when the hashes were taken, so a subscriber
	 * that has seen batches 0 .. seq - 1 should hold exactly these */
	ok = ok && cJSON_AddNumberToObject(o, "seq", (double)s->kv_held_seq);
	for (int64_t i = 0; ok && i < s->n_kv_held; i++) {
		char x[24];
		snprintf(x, sizeof(x), "%" PRIu64, s->kv_held[i]);
		ok = cJSON_AddItemToArray(h, cJSON_CreateRaw(x)); /* exact 64-bit integers */
	}
	pthread_mutex_unlock(&s->lock);
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}
