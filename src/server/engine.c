/* The engine loop: continuous batching over one paged fx_context.
 *
 * Each step: (1) under the lock, drop cancelled choices and admit queued
 * ones into free slots; (2) without the lock, build one batch (a row per
 * decoding choice, plus prompt chunks of at most s->chunk tokens in all
 * for prefilling ones, so a long prompt never stalls running streams) and
 * run fx_batch_decode; (3) sample each choice that produced logits, match
 * stop strings, and (4) under the lock publish text, finished choices and
 * metrics. Logits are per-sequence bit-identical whatever shares the step,
 * so a request's greedy text does not depend on its neighbours.
 *
 * Sampling noise is keyed by the position of the token drawn
 * (fx_sampler_sample_at), so a speculative choice gives the text plain
 * decoding gives for the same seed: its decode rows are [last, drafts]
 * (ngram-simple over its prompt and output, fx_spec_draft) in the same
 * batch as everyone else's rows, every row keeps logits, and the rows go
 * through choice_step in order while the sampled token equals the draft;
 * the rejected drafts' K/V are removed (fx_seq_rm). Drafts stay within the
 * request's max_tokens and context, SRV_SPEC_STEP_MAX per choice and
 * s->chunk per step (the rows the batch staging reserves for them).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"
#include "server/tools.h" /* hooks: srvtool_req_free, srvtool_lazy_step */

double srv_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct srv_req *srv_req_new(struct srv *s, enum srv_kind kind)
{
	struct srv_req *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	if (pthread_cond_init(&r->cond, NULL)) {
		free(r);
		return NULL;
	}
	r->kind = kind;
	r->refs = 1;
	r->want_slot = -1;
	r->model_name = s->model_name;
	r->created = (int64_t)time(NULL);
	r->t_arrive = srv_now();
	pthread_mutex_lock(&s->lock);
	uint64_t id = ++s->id_counter;
	pthread_mutex_unlock(&s->lock);
	r->n_id = id;
	snprintf(r->id, sizeof(r->id), "%s-%llx%06llx", kind == SRV_CHAT ? "chatcmpl" : "cmpl",
		 (unsigned long long)r->created, (unsigned long long)id);
	return r;
}

static void choice_fini(struct srv_choice *c)
{
	fx_sampler_free(c->smp);
	fx_matcher_free(c->matcher);
	free(c->counts);
	free(c->hist);
	free(c->toks);
	srv_buf_free(&c->text);
	cJSON_Delete(c->lp);
	cJSON_Delete(c->lp_all);
}

void srv_req_unref_locked(struct srv_req *r)
{
	if (!r || --r->refs > 0)
		return;
	for (int i = 0; r->ch && i < r->g.n; i++)
		choice_fini(&r->ch[i]);
	free(r->ch);
	free(r->prompt);
	free(r->prompt_text);
	srv_gen_fini(&r->g);
	srvtool_req_free(r->tool); /* hook (tools.c): tool-call parsing state */
	srv_buf_free(&r->out);
	pthread_cond_destroy(&r->cond);
	free(r);
}

/* ---- per-run engine state ---- */

struct engine {
	struct srv *s;
	struct srv_choice **slot;   /* [n_parallel] running choice or NULL */
	bool seq0_busy;
	/* batch staging, [cap] */
	fx_seq *b_seq;
	fx_token *b_tok;
	bool *b_logits;
	struct srv_choice **b_owner; /* row -> choice when it keeps logits */
	int32_t cap;
	float *scratch;             /* [n_vocab] logits after bias and penalties */
	int *seq_status;            /* [n_parallel] */
	const char **fin;           /* [n_parallel] finish reason per slot, this step */
	struct srv_choice **prefill;/* [n_parallel] prefilling choices, this step */
	uint64_t st_drafts, st_draft_tokens, st_accepted; /* this step's speculation */
};

int srv_submit(struct srv *s, struct srv_req *r)
{
	pthread_mutex_lock(&s->lock);
	if (s->draining || !s->ready) {
		if (s->draining)
			s->t_refused = srv_now();
		pthread_mutex_unlock(&s->lock);
		return 503;
	}
	if (s->n_queued >= s->max_queue) {
		pthread_mutex_unlock(&s->lock);
		return 429;
	}
	r->refs++;
	r->next = NULL;
	if (s->q_tail)
		s->q_tail->next = r;
	else
		s->q_head = r;
	s->q_tail = r;
	s->n_queued++;
	s->met.waiting += r->g.n;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* Set up choice c for running: sampler, penalties. Engine thread, no lock. */
static int choice_start(struct engine *E, struct srv_choice *c)
{
	struct srv *s = E->s;
	const struct srv_gen *g = &c->req->g;
	struct fx_sampler_params sp = fx_sampler_default_params();
	sp.temp = g->temperature;
	sp.top_k = g->top_k;
	sp.top_p = g->top_p;
	sp.min_p = g->min_p;
	sp.repeat_penalty = g->repeat_penalty;
	sp.repeat_last_n = g->repeat_last_n < 0 ? (int32_t)s->n_ctx_seq : g->repeat_last_n;
	if (g->has_seed) {
		sp.seed = g->seed + (uint64_t)c->index;
	} else {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		sp.seed = (uint64_t)ts.tv_nsec * 6364136223846793005ull ^ (uint64_t)ts.tv_sec ^
			  ((uint64_t)(uintptr_t)c << 7);
	}
	struct fx_err err;
	if (fx_sampler_create(&sp, s->n_vocab, &c->smp, &err))
		return FX_E_NOMEM;
	/* the repetition penalty sees the prompt too (llama-server and vLLM) */
	for (int32_t i = 0; sp.repeat_penalty != 1.0f && i < c->req->n_prompt; i++)
		fx_sampler_accept(c->smp, c->req->prompt[i]);
	if (g->grammar) {
		/* the trie is built once, on the first request that needs it */
		if (!s->gvocab && fx_grammar_vocab_create(s->model, &s->gvocab, &err)) {
			fprintf(stderr, "serve: %s\n", err.msg);
			return FX_E_NOMEM;
		}
		if (fx_matcher_create(g->grammar, s->gvocab, &c->matcher, &err))
			return FX_E_NOMEM;
		fx_sampler_set_matcher(c->smp, c->matcher);
	}
	if (g->presence != 0 || g->frequency != 0) {
		c->counts = calloc((size_t)s->n_vocab, sizeof(*c->counts));
		if (!c->counts)
			return FX_E_NOMEM;
	}
	if (g->logprobs) {
		c->lp = cJSON_CreateArray();
		c->lp_all = cJSON_CreateArray();
		if (!c->lp || !c->lp_all)
			return FX_E_NOMEM;
	}
	if (s->can_spec && g->spec.types && g->spec.n_max > 0) {
		/* the drafter's text: prompt and output (at most n_ctx_seq tokens) */
		c->hist_cap = (int32_t)s->n_ctx_seq + 1;
		c->hist = malloc((size_t)c->hist_cap * sizeof(*c->hist));
		if (!c->hist)
			return FX_E_NOMEM;
		memcpy(c->hist, c->req->prompt, (size_t)c->req->n_prompt * sizeof(*c->hist));
		c->n_hist = c->req->n_prompt;
		c->draft_len = g->spec.n_max;
	}
	return FX_OK;
}

/* Finish choice c (engine, lock held): release its sequence and slot. */
static void choice_end_locked(struct engine *E, struct srv_choice *c, const char *finish)
{
	struct srv *s = E->s;
	struct srv_req *r = c->req;
	if (!c->finish)
		c->finish = finish;
	if (c->slot >= 0) {
		srv_slot_end_locked(s, c->slot, c);
		fx_seq_free(s->ctx, c->seq);
		if (c->seq == 0)
			E->seq0_busy = false;
		E->slot[c->slot] = NULL;
		c->slot = -1;
		s->met.running--;
	}
	if (++r->n_done == r->g.n) {
		r->done = true;
		double t = srv_now();
		srv_hist_add(&s->met.e2e, t - r->t_arrive);
		bool failed = false;
		for (int i = 0; i < r->g.n; i++)
			failed |= !strcmp(r->ch[i].finish, "error");
		r->failed = failed;
		if (r->cancelled || failed) {
			s->met.req_abort++;
			fprintf(stderr, "serve: %s %s after %d tokens\n", r->id,
				r->cancelled ? "cancelled (client gone)" : "failed in the engine",
				c->n_gen);
		} else if (!strcmp(c->finish, "length")) {
			s->met.req_length++;
		} else {
			s->met.req_stop++;
		}
		if (r->g.stream && !r->cancelled && !srv_sse_end(r, &r->out))
			r->failed = true; /* no [DONE]: the client sees a broken stream */
		pthread_cond_broadcast(&r->cond);
		srv_req_unref_locked(r);
	}
}

/* Longest suffix of text[from..n) that is a proper prefix of a stop string. */
static size_t stop_holdback(const struct srv_gen *g, const char *text, size_t n, size_t from)
{
	size_t best = 0;
	for (int i = 0; i < g->n_stop; i++) {
		size_t ls = strlen(g->stop[i]);
		size_t k = ls - 1 < n - from ? ls - 1 : n - from;
		for (; k > best; k--)
			if (!memcmp(text + n - k, g->stop[i], k)) {
				best = k;
				break;
			}
	}
	return best;
}

/* Earliest stop string occurrence in text[from..n): its offset, or -1;
 * *which: that stop string's index. */
static long stop_find(const struct srv_gen *g, const char *text, size_t n, size_t from, int *which)
{
	long best = -1;
	for (int i = 0; i < g->n_stop; i++) {
		const char *p = memmem(text + from, n - from, g->stop[i], strlen(g->stop[i]));
		if (p && (best < 0 || p - text < best)) {
			best = p - text;
			*which = i;
		}
	}
	return best;
}

/* Append t to c's sampled tokens (llama-server's "tokens", the slot's
 * record). false: out of memory. */
static bool record_token(struct srv_choice *c, fx_token t)
{
	if (c->n_toks == c->toks_cap) {
		int32_t cap = c->toks_cap ? 2 * c->toks_cap : 64;
		fx_token *p = realloc(c->toks, (size_t)cap * sizeof(*p));
		if (!p)
			return false;
		c->toks = p;
		c->toks_cap = cap;
	}
	c->toks[c->n_toks++] = t;
	return true;
}

/* The logits choice c samples from: raw, or a scratch copy with logit_bias
 * and presence/frequency penalties (OpenAI: logit - count * frequency -
 * (count > 0) * presence) applied. */
static const float *shaped_logits(struct engine *E, struct srv_choice *c, const float *raw)
{
	const struct srv_gen *g = &c->req->g;
	if (!g->n_bias && !c->counts)
		return raw;
	int32_t nv = E->s->n_vocab;
	memcpy(E->scratch, raw, (size_t)nv * sizeof(float));
	for (int32_t i = 0; i < g->n_bias; i++)
		E->scratch[g->bias_id[i]] += g->bias_val[i];
	for (int32_t t = 0; c->counts && t < nv; t++)
		if (c->counts[t])
			E->scratch[t] -= (float)c->counts[t] * g->frequency + g->presence;
	return E->scratch;
}

/* Sample c's next token from raw logits, the token to take position pos
 * of its sequence, and append its text. Returns the finish reason or NULL
 * to keep going. Engine thread, no lock. */
static const char *choice_step(struct engine *E, struct srv_choice *c, const float *raw,
			       int64_t pos)
{
	struct srv *s = E->s;
	struct srv_req *r = c->req;
	const struct srv_gen *g = &r->g;
	if (g->max_tokens == 0)
		return "length"; /* the prompt is evaluated, nothing generated */
	const float *lg = shaped_logits(E, c, raw);
	fx_token t = fx_sampler_sample_at(c->smp, lg, pos);
	if (t < 0)
		return "error"; /* the grammar allows nothing (or its mask ran out of memory) */
	double now = srv_now();
	if (c->n_gen == 0)
		c->t_first = now;
	c->t_prev = c->t_last;
	c->t_last = now;
	c->n_gen++;
	c->last = t;
	if (!record_token(c, t))
		return "error";
	if (c->hist && c->n_hist < c->hist_cap)
		c->hist[c->n_hist++] = t;
	if (!g->ignore_eos && fx_token_is_eog(s->model, t))
		return "stop";
	if (c->matcher && fx_matcher_accept(c->matcher, t))
		return "error";
	fx_sampler_accept(c->smp, t);
	if (c->counts)
		c->counts[t]++;
	if (g->logprobs) {
		/* a missing entry would be a wrong answer: the choice fails instead */
		cJSON *e = srv_logprob_entry(s, r, lg, t);
		if (!e || !cJSON_AddItemToArray(r->g.stream ? c->lp : c->lp_all, e)) {
			cJSON_Delete(e);
			return "error";
		}
	}
	char buf[256];
	size_t n = 0;
	/* hook (tools.c): a call format whose markers are control tokens needs them shown */
	if (fx_detok_push(s->model, &c->dt, t, r->detok_special || s->p.special, buf, sizeof(buf), &n) ||
	    !srv_buf_add(&c->text, buf, n))
		return "error";
	srvtool_lazy_step(s, c); /* hook (tools.c): a lazy tool-call grammar starts at its trigger */
	if (g->n_stop) {
		size_t from = c->n_sent;
		long at = stop_find(g, c->text.p, c->text.n, from, &c->stop_idx);
		if (at >= 0) {
			c->text.n = (size_t)at;
			c->text.p[at] = 0;
			c->hit_stop = true;
			return "stop";
		}
	}
	if (c->matcher && fx_matcher_is_done(c->matcher))
		return "stop"; /* the grammar admits nothing more */
	if (g->max_tokens >= 0 && c->n_gen >= g->max_tokens)
		return "length";
	if (pos + 1 >= (int64_t)s->n_ctx_seq && !s->p.context_shift)
		return "length"; /* with the shift: rows_step makes room */
	return NULL;
}

/* --context-shift, as llama-server's: keep the BOS (its n_keep 0 +
 * add_bos), drop half of the other rows, move the rest down. false when
 * the backing refuses (logged). */
static bool shift_context(struct srv *s, struct srv_choice *c)
{
	int32_t n_keep = fx_add_bos(s->model) ? 1 : 0, n_past = (int32_t)fx_seq_n_past(s->ctx, c->seq);
	int32_t n_discard = (n_past - n_keep) / 2;
	if (n_discard <= 0 || fx_seq_shift(s->ctx, c->seq, n_keep + n_discard, -1, -n_discard)) {
		fprintf(stderr, "serve: %s: context shift refused: %s\n", c->req->id,
			n_discard <= 0 ? "nothing to drop" : fx_context_errmsg(s->ctx));
		return false;
	}
	return true;
}

/* Choice c's rows first .. first + c->n_draft of the step's batch ([last,
 * drafts], or a prompt's last token) through choice_step in order, each
 * sampled at the position after its own, while the sampled token equals
 * the draft its row is followed by; the rejected drafts' rows are removed.
 * Returns the finish reason or NULL. */
static const char *rows_step(struct engine *E, struct srv_choice *c, int32_t first)
{
	struct srv *s = E->s;
	int32_t k = c->n_draft, i = 0, gen0 = c->n_gen;
	int64_t past = (int64_t)fx_seq_n_past(s->ctx, c->seq); /* after the rows */
	double t0 = c->t_last;
	const char *f;
	for (;; i++) {
		const float *lg = fx_batch_logits(s->ctx, first + i);
		/* row first + i holds position past - k - 1 + i */
		f = lg ? choice_step(E, c, lg, past - k + i) : "error";
		bool hit = i < k && c->n_gen > gen0 + i && c->last == c->draft[i];
		c->draft_n_accepted += hit;
		E->st_accepted += hit;
		if (f || !hit)
			break;
	}
	c->step_gen = c->n_gen - gen0;
	if (c->step_gen && gen0)
		c->t_prev = t0; /* the step's tokens come together: one gap */
	if (k) {
		c->draft_n += k;
		E->st_drafts++;
		E->st_draft_tokens += (uint64_t)k;
		int32_t nm = c->req->g.spec.n_max;
		c->draft_len = i >= k ? (c->draft_len < nm / 2 ? 2 * c->draft_len : nm) : i + 1;
	}
	/* keep last and the i drafts sampled: the next row is c->last */
	if (i < k && fx_seq_rm(s->ctx, c->seq, (uint32_t)(past - k + i)) && !f) {
		fprintf(stderr, "serve: %s: rolling back drafts: %s\n", c->req->id,
			fx_context_errmsg(s->ctx));
		f = "error";
	}
	/* c->last takes the next position: at the context's end, room first */
	if (!f && s->p.context_shift && (int64_t)fx_seq_n_past(s->ctx, c->seq) + 1 >= (int64_t)s->n_ctx_seq &&
	    !shift_context(s, c))
		f = "length";
	return f;
}

/* Stream what choice c can show now (lock held). false: out of memory,
 * nothing sent (the choice must fail: a stream missing a chunk would be a
 * wrong answer). */
static bool choice_publish_locked(struct srv_choice *c, bool final)
{
	struct srv_req *r = c->req;
	if (!r->g.stream || r->cancelled)
		return true;
	size_t upto = c->text.n;
	if (!final)
		upto -= stop_holdback(&r->g, c->text.p, c->text.n, c->n_sent);
	bool has_lp = c->lp && cJSON_GetArraySize(c->lp) > 0;
	if (upto == c->n_sent && !final && !has_lp)
		return true;
	const char *text = c->text.p ? c->text.p + c->n_sent : "";
	struct srv_buf echo = { 0 };
	bool ok;
	if (!c->role_sent && r->g.echo && r->prompt_text) /* the prompt first */
		ok = srv_buf_add(&echo, r->prompt_text, strlen(r->prompt_text)) &&
		     srv_buf_add(&echo, text, upto - c->n_sent) &&
		     srv_sse_chunk(r, c, echo.p, echo.n, true, &r->out);
	else
		ok = srv_sse_chunk(r, c, text, upto - c->n_sent, !c->role_sent, &r->out);
	srv_buf_free(&echo);
	cJSON *lp = ok && c->lp ? cJSON_CreateArray() : NULL;
	if (!ok || (c->lp && !lp))
		return false;
	c->role_sent = true;
	c->n_sent = upto;
	c->n_toks_sent = c->n_toks;
	if (c->lp) {
		cJSON_Delete(c->lp);
		c->lp = lp;
	}
	pthread_cond_broadcast(&r->cond);
	return true;
}

static bool grow(struct engine *E, int32_t need)
{
	if (need <= E->cap)
		return true;
	int32_t cap = need * 2;
	fx_seq *a = realloc(E->b_seq, (size_t)cap * sizeof(*a));
	if (a)
		E->b_seq = a;
	fx_token *b = realloc(E->b_tok, (size_t)cap * sizeof(*b));
	if (b)
		E->b_tok = b;
	bool *c = realloc(E->b_logits, (size_t)cap * sizeof(*c));
	if (c)
		E->b_logits = c;
	struct srv_choice **d = realloc(E->b_owner, (size_t)cap * sizeof(*d));
	if (d)
		E->b_owner = d;
	if (!a || !b || !c || !d)
		return false;
	E->cap = cap;
	return true;
}

/* Under the lock: end cancelled choices, then fill free slots from the
 * queue. Returns the number of running choices. */
static int admit_locked(struct engine *E)
{
	struct srv *s = E->s;
	int running = 0;
	for (int i = 0; i < s->n_parallel; i++) {
		struct srv_choice *c = E->slot[i];
		if (c && c->req->cancelled)
			choice_end_locked(E, c, "cancelled");
	}
	/* queued requests whose client left: drop their unadmitted choices */
	for (struct srv_req **pp = &s->q_head; *pp;) {
		struct srv_req *r = *pp;
		if (!r->cancelled) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		if (s->q_tail == r) {
			s->q_tail = NULL;
			for (struct srv_req *q = s->q_head; q; q = q->next)
				s->q_tail = q;
		}
		s->n_queued -= r->next_admit == 0;
		s->met.waiting -= r->g.n - r->next_admit;
		while (r->next_admit < r->g.n) {
			struct srv_choice *c = &r->ch[r->next_admit++];
			choice_end_locked(E, c, "cancelled");
		}
	}
	for (int i = 0; i < s->n_parallel; i++) {
		if (E->slot[i]) {
			running++;
			continue;
		}
		struct srv_req *r = s->q_head;
		if (!r || (r->want_slot >= 0 && r->want_slot != i))
			continue; /* llama-server's id_slot: it waits for its slot (in order) */
		struct srv_choice *c = &r->ch[r->next_admit];
		fx_seq seq = 0;
		if (E->seq0_busy && fx_seq_add(s->ctx, &seq))
			break;
		r->next_admit++;
		if (r->next_admit == 1)
			s->n_queued--;
		if (r->next_admit == r->g.n) {
			s->q_head = r->next;
			if (!s->q_head)
				s->q_tail = NULL;
		}
		s->met.waiting--;
		s->met.running++;
		if (seq == 0)
			E->seq0_busy = true;
		c->seq = seq;
		c->slot = i;
		c->id_slot = i;
		c->t_admit = srv_now();
		c->n_fed = 0;
		E->slot[i] = c;
		s->met.prefix_queries += (uint64_t)r->n_prompt;
		s->met.prompt_tokens += (uint64_t)r->n_prompt;
		if (choice_start(E, c)) {
			choice_end_locked(E, c, "error");
			continue;
		}
		/* Cached prefix blocks before the first chunk: the batch's own reuse
		 * sees only one chunk of a long prompt. */
		uint32_t got = 0;
		if (!fx_seq_reuse_prefix(s->ctx, seq, r->prompt, (uint32_t)r->n_prompt, &got))
			c->n_fed = (int32_t)got;
		c->n_cached = c->n_fed;
		srv_slot_begin_locked(s, i, c);
		running++;
	}
	s->met.blocks_used = fx_context_kv_blocks_used(s->ctx);
	return running;
}

/* Drafts for decoding choice c into c->draft: at most budget, what its
 * max_tokens leaves after the step's own token, and rows up to position
 * n_ctx_seq - 2 (the last a plain choice decodes); none when fewer than
 * its n_min. */
static int32_t draft(struct engine *E, struct srv_choice *c, int32_t budget)
{
	const struct srv_gen *g = &c->req->g;
	int64_t cap = budget < SRV_SPEC_STEP_MAX ? budget : SRV_SPEC_STEP_MAX;
	if (c->draft_len < cap)
		cap = c->draft_len > 0 ? c->draft_len : 1;
	if (g->max_tokens >= 0 && (int64_t)g->max_tokens - c->n_gen - 1 < cap)
		cap = (int64_t)g->max_tokens - c->n_gen - 1;
	int64_t room = (int64_t)E->s->n_ctx_seq - 2 - fx_seq_n_past(E->s->ctx, c->seq);
	if (room < cap)
		cap = room;
	if (fx_context_roll_back_max(E->s->ctx) < cap) /* a recurrent state's ring */
		cap = fx_context_roll_back_max(E->s->ctx);
	if (cap <= 0)
		return 0;
	int32_t k = fx_spec_draft(&g->spec, c->hist, c->n_hist, c->draft, (int32_t)cap);
	return k < g->spec.n_min ? 0 : k;
}

/* Append rows for choice c to the batch: its next token when decoding
 * (then its drafts, taken from *spec_budget), or up to *budget prompt
 * tokens (logits only at the prompt's last token). */
static bool add_rows(struct engine *E, struct srv_choice *c, int32_t *n, int32_t *budget,
		     int32_t *spec_budget)
{
	struct srv_req *r = c->req;
	bool decode = c->n_fed == r->n_prompt;
	int32_t k = decode ? 1 : r->n_prompt - c->n_fed;
	if (!decode && k > *budget)
		k = *budget;
	c->n_draft = decode && c->hist ? draft(E, c, *spec_budget) : 0;
	k += c->n_draft;
	if (k <= 0 || !grow(E, *n + k)) {
		c->n_draft = 0;
		return false;
	}
	if (!decode)
		*budget -= k;
	*spec_budget -= c->n_draft;
	for (int32_t j = 0; j < k; j++, ++*n) {
		E->b_seq[*n] = c->seq;
		E->b_tok[*n] = !decode ? r->prompt[c->n_fed + j] : j ? c->draft[j - 1] : c->last;
		E->b_logits[*n] = decode || c->n_fed + j == r->n_prompt - 1;
		E->b_owner[*n] = c;
	}
	return true;
}

static int32_t prompt_left(const struct srv_choice *c)
{
	return c->req->n_prompt - c->n_fed;
}

/* One step over the running choices. No lock held. Every decoding choice
 * gets its row, then its drafts (s->chunk of them in all); prefilling ones
 * share s->chunk prompt tokens (twice that when nothing decodes), fewest
 * remaining tokens first, so a short prompt is not stuck behind a long
 * one. */
/* The step's KV-cache events to the publisher, and the context's own view
 * of its held blocks (GET /kv_cache_blocks) as of them. */
static void kv_events_step(struct srv *s)
{
	if (!s->kvev)
		return;
	uint64_t after, x;
	if (!srv_kvev_collect(s->kvev, s->ctx))
		return;
	srv_kvev_stats(s->kvev, &x, &x, &x, &after);
	int64_t n = fx_context_kv_held(s->ctx, NULL, 0);
	pthread_mutex_lock(&s->lock);
	if (n > s->kv_held_cap) {
		uint64_t *h = realloc(s->kv_held, (size_t)n * sizeof(*h));
		if (h) {
			s->kv_held = h;
			s->kv_held_cap = n;
		}
	}
	if (n <= s->kv_held_cap) {
		s->n_kv_held = fx_context_kv_held(s->ctx, s->kv_held, s->kv_held_cap);
		s->kv_held_seq = after;
	}
	pthread_mutex_unlock(&s->lock);
}

static void step(struct engine *E)
{
	struct srv *s = E->s;
	int32_t n = 0, budget = s->chunk, n_pre = 0, spec_budget = s->chunk;
	struct srv_choice **pre = E->prefill;
	E->st_drafts = E->st_draft_tokens = E->st_accepted = 0;
	for (int i = 0; i < s->n_parallel; i++) {
		struct srv_choice *c = E->slot[i];
		if (!c)
			continue;
		if (prompt_left(c) == 0)
			add_rows(E, c, &n, &budget, &spec_budget);
		else
			pre[n_pre++] = c;
	}
	if (!n)
		budget *= 2;
	for (int i = 1; i < n_pre; i++) /* insertion sort: at most n_parallel */
		for (int j = i; j > 0 && prompt_left(pre[j]) < prompt_left(pre[j - 1]); j--) {
			struct srv_choice *t = pre[j];
			pre[j] = pre[j - 1];
			pre[j - 1] = t;
		}
	for (int i = 0; i < n_pre && budget > 0; i++)
		add_rows(E, pre[i], &n, &budget, &spec_budget);
	if (!n)
		return;
	double t0 = srv_now();
	int rc = fx_batch_decode(s->ctx, &(struct fx_batch){ .n = n, .seq = E->b_seq,
							      .token = E->b_tok,
							      .logits = E->b_logits },
				 E->seq_status);
	if (rc == FX_E_NOMEM)
		fprintf(stderr, "serve: decode step failed: %s\n", fx_context_errmsg(s->ctx));
	/* advance prompt positions, sample where logits came out; a choice's
	 * rows are consecutive */
	int n_seqs = 0;
	const char **fin = E->fin;
	memset(fin, 0, (size_t)s->n_parallel * sizeof(*fin));
	for (int32_t i = 0, j; i < n; i = j) {
		struct srv_choice *c = E->b_owner[i];
		for (j = i; j < n && E->b_owner[j] == c; j++)
			;
		n_seqs++;
		c->step_gen = 0;
		if (E->seq_status[c->seq]) {
			fin[c->slot] = "error";
			continue;
		}
		if (c->n_fed < c->req->n_prompt)
			c->n_fed += j - i;
		if (E->b_logits[j - 1])
			fin[c->slot] = rows_step(E, c, j - 1 - c->n_draft);
	}
	double t1 = srv_now();
	pthread_mutex_lock(&s->lock);
	s->met.steps++;
	srv_hist_add(&s->met.step_time, t1 - t0);
	s->met.step_rows += (uint64_t)n;
	srv_hist_add(&s->met.step_seqs, n_seqs);
	for (int32_t i = 0, j; i < n; i = j) {
		struct srv_choice *c = E->b_owner[i];
		for (j = i; j < n && E->b_owner[j] == c; j++)
			;
		if (E->seq_status[c->seq] || !c->step_gen)
			continue;
		s->met.gen_tokens += (uint64_t)c->step_gen;
		s->slots[c->slot].n_decoded = c->n_gen;
		if (c->n_gen == c->step_gen)
			srv_hist_add(&s->met.ttft, c->t_first - c->req->t_arrive);
		else /* one gap per step: a step's tokens arrive together */
			srv_hist_add(&s->met.itl, c->t_last - c->t_prev);
	}
	s->met.spec_drafts += E->st_drafts;
	s->met.spec_draft_tokens += E->st_draft_tokens;
	s->met.spec_accepted += E->st_accepted;
	for (int i = 0; i < s->n_parallel; i++) {
		struct srv_choice *c = E->slot[i];
		if (!c)
			continue;
		if (fin[i]) {
			if (!c->hit_stop) {
				char tail[64];
				size_t nt = 0;
				if (!fx_detok_flush(&c->dt, tail, sizeof(tail), &nt) &&
				    !srv_buf_add(&c->text, tail, nt))
					fin[i] = "error";
			}
			c->finish = fin[i];
			if (!choice_publish_locked(c, true))
				c->finish = "error";
			choice_end_locked(E, c, c->finish);
		} else if (c->n_gen && !choice_publish_locked(c, false)) {
			c->finish = "error";
			choice_end_locked(E, c, "error");
		}
	}
	s->met.blocks_used = fx_context_kv_blocks_used(s->ctx);
	s->met.prefix_hits = fx_context_prefix_hits(s->ctx);
	pthread_mutex_unlock(&s->lock);
	kv_events_step(s);
}

static void engine_free(struct engine *E)
{
	if (!E)
		return;
	free(E->slot);
	free(E->b_seq);
	free(E->b_tok);
	free(E->b_logits);
	free(E->b_owner);
	free(E->scratch);
	free(E->seq_status);
	free(E->fin);
	free(E->prefill);
	free(E);
}

/* The first queued slot action whose slot is idle, taken off the list
 * (lock held), or NULL. */
static struct srv_slot_task *slot_task_take_locked(struct engine *E)
{
	for (struct srv_slot_task **pp = &E->s->sl_head; *pp; pp = &(*pp)->next) {
		struct srv_slot_task *t = *pp;
		if (!E->slot[t->id_slot]) {
			*pp = t->next;
			return t;
		}
	}
	return NULL;
}

/* Run t between steps on a free sequence (one exists: t's slot is idle),
 * then hand the result to its HTTP thread. */
static void slot_task_run(struct engine *E, struct srv_slot_task *t)
{
	struct srv *s = E->s;
	fx_seq seq = 0;
	bool own0 = !E->seq0_busy;
	if (own0)
		E->seq0_busy = true;
	if (!own0 && fx_seq_add(s->ctx, &seq)) {
		t->status = 503;
		snprintf(t->msg, sizeof(t->msg), "no free sequence for the slot action: retry");
	} else {
		srv_slot_run(s, t, seq);
		fx_seq_free(s->ctx, seq);
	}
	if (own0)
		E->seq0_busy = false;
	pthread_mutex_lock(&s->lock);
	t->done = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&s->lock);
}

static void *engine_main(void *arg)
{
	struct engine *E = arg;
	struct srv *s = E->s;
	for (;;) {
		pthread_mutex_lock(&s->lock);
		int running;
		struct srv_slot_task *t = NULL;
		while (!(running = admit_locked(E)) && !s->q_head && !s->e_head && !s->stop_engine &&
		       !(t = slot_task_take_locked(E)))
			pthread_cond_wait(&s->wake, &s->lock);
		if (!t)
			t = slot_task_take_locked(E);
		if (!running && !s->q_head && !s->e_head && !t && s->stop_engine) {
			/* actions still waiting get an answer, not a hang */
			for (struct srv_slot_task *u = s->sl_head; u; u = u->next) {
				u->status = 503;
				snprintf(u->msg, sizeof(u->msg), "the server is shutting down");
				u->done = true;
				pthread_cond_broadcast(&u->cond);
			}
			s->sl_head = NULL;
			pthread_mutex_unlock(&s->lock);
			break;
		}
		bool embed = s->e_head != NULL;
		pthread_mutex_unlock(&s->lock);
		if (t)
			slot_task_run(E, t);
		if (running)
			step(E);
		/* embeddings between steps: a few inputs at a time (embed.c) */
		if (embed)
			srv_emb_step(s, running > 0);
	}
	engine_free(E);
	return NULL;
}

/* The slots go with the engine that fills them (under the lock: GET
 * /slots may be reading). */
static void slots_free(struct srv *s)
{
	pthread_mutex_lock(&s->lock);
	for (int i = 0; s->slots && i < s->n_parallel; i++)
		free(s->slots[i].tok);
	free(s->slots);
	s->slots = NULL;
	pthread_mutex_unlock(&s->lock);
}

int srv_engine_start(struct srv *s, struct fx_err *err)
{
	struct engine *E = calloc(1, sizeof(*E));
	if (!E)
		goto nomem;
	E->s = s;
	E->slot = calloc((size_t)s->n_parallel, sizeof(*E->slot));
	E->scratch = calloc((size_t)s->n_vocab, sizeof(float));
	E->seq_status = calloc((size_t)s->n_parallel, sizeof(int));
	E->fin = calloc((size_t)s->n_parallel, sizeof(*E->fin));
	E->prefill = calloc((size_t)s->n_parallel, sizeof(*E->prefill));
	pthread_mutex_lock(&s->lock);
	s->slots = calloc((size_t)s->n_parallel, sizeof(*s->slots));
	bool no_slots = !s->slots;
	pthread_mutex_unlock(&s->lock);
	if (no_slots || !E->prefill || !E->fin || !E->slot || !E->scratch || !E->seq_status ||
	    !grow(E, s->n_parallel + 3 * s->chunk))
		goto nomem;
	s->met.blocks_total = fx_context_kv_blocks_total(s->ctx);
	if (pthread_create(&s->engine, NULL, engine_main, E)) {
		engine_free(E);
		slots_free(s);
		err->code = FX_E_NOMEM;
		snprintf(err->msg, sizeof(err->msg), "cannot start the engine thread");
		return FX_E_NOMEM;
	}
	s->engine_started = true;
	return FX_OK;
nomem:
	engine_free(E);
	slots_free(s);
	err->code = FX_E_NOMEM;
	snprintf(err->msg, sizeof(err->msg), "out of memory starting the engine");
	return FX_E_NOMEM;
}

void srv_engine_stop(struct srv *s)
{
	if (!s->engine_started)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop_engine = true;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->engine, NULL);
	s->engine_started = false;
	slots_free(s);
}
