/* /metrics: Prometheus text exposition format 0.0.4 (a HELP and a TYPE
 * line per family; histograms as cumulative _bucket{le=...} series ending
 * at le="+Inf", then _sum and _count). vLLM's metric names where vLLM has
 * one (routers and autoscalers read them), ferrox_ for the rest. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "server/server.h"

static const double LE_TTFT[] = { 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
				  0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0 };
static const double LE_ITL[] = { 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
				 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0 };
static const double LE_E2E[] = { 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
				 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0 };
static const double LE_SEQS[] = { 1, 2, 4, 8, 16, 32, 64, 128 };
static const double LE_STEP[] = { 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56,
				  5.12 };

#define NLE(a) ((int)(sizeof(a) / sizeof((a)[0])))

void srv_metrics_init(struct srv_metrics *m)
{
	memset(m, 0, sizeof(*m));
	m->ttft = (struct srv_hist){ .le = LE_TTFT, .n = NLE(LE_TTFT) };
	m->itl = (struct srv_hist){ .le = LE_ITL, .n = NLE(LE_ITL) };
	m->e2e = (struct srv_hist){ .le = LE_E2E, .n = NLE(LE_E2E) };
	m->step_seqs = (struct srv_hist){ .le = LE_SEQS, .n = NLE(LE_SEQS) };
	m->step_time = (struct srv_hist){ .le = LE_STEP, .n = NLE(LE_STEP) };
}

void srv_hist_add(struct srv_hist *h, double v)
{
	int i = 0;
	while (i < h->n && v > h->le[i])
		i++;
	h->count[i]++;
	h->sum += v;
}

static bool out_f(struct srv_buf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool out_f(struct srv_buf *o, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return false;
	return srv_buf_add(o, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

static void family(struct srv_buf *o, const char *name, const char *type, const char *help)
{
	out_f(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void scalar(struct srv_buf *o, const char *name, const char *type, const char *help,
		   const char *lbl, double v)
{
	family(o, name, type, help);
	out_f(o, "%s%s %.17g\n", name, lbl, v);
}

static void hist(struct srv_buf *o, const char *name, const char *help, const char *model,
		 const struct srv_hist *h)
{
	family(o, name, "histogram", help);
	uint64_t cum = 0;
	for (int i = 0; i < h->n; i++) {
		cum += h->count[i];
		out_f(o, "%s_bucket{le=\"%g\"%s%s} %llu\n", name, h->le[i], model ? "," : "",
		      model ? model : "", (unsigned long long)cum);
	}
	cum += h->count[h->n];
	out_f(o, "%s_bucket{le=\"+Inf\"%s%s} %llu\n", name, model ? "," : "", model ? model : "",
	      (unsigned long long)cum);
	out_f(o, "%s_sum%s%s%s %.17g\n", name, model ? "{" : "", model ? model : "",
	      model ? "}" : "", h->sum);
	out_f(o, "%s_count%s%s%s %llu\n", name, model ? "{" : "", model ? model : "",
	      model ? "}" : "", (unsigned long long)cum);
}

bool srv_metrics_text(const struct srv_metrics *m, const char *model_name, struct srv_buf *o)
{
	/* label value escaping: backslash, double quote, newline */
	char esc[256];
	size_t k = 0;
	for (const char *p = model_name; *p && k + 3 < sizeof(esc); p++) {
		if (*p == '\\' || *p == '"')
			esc[k++] = '\\', esc[k++] = *p;
		else if (*p == '\n')
			esc[k++] = '\\', esc[k++] = 'n';
		else
			esc[k++] = *p;
	}
	esc[k] = 0;
	char model[300], lbl[310];
	snprintf(model, sizeof(model), "model_name=\"%s\"", esc);
	snprintf(lbl, sizeof(lbl), "{%s}", model);
	double usage = m->blocks_total ? (double)m->blocks_used / m->blocks_total : 0.0;
	scalar(o, "vllm:num_requests_running", "gauge", "Sequences being decoded now.", lbl,
	       m->running);
	scalar(o, "vllm:num_requests_waiting", "gauge", "Sequences waiting for a slot.", lbl,
	       m->waiting);
	scalar(o, "vllm:kv_cache_usage_perc", "gauge",
	       "KV-cache usage: fraction of paged blocks in use (1 = full).", lbl, usage);
	scalar(o, "vllm:gpu_cache_usage_perc", "gauge",
	       "KV-cache usage (vLLM's older name; ferrox runs on the CPU).", lbl, usage);
	scalar(o, "vllm:prompt_tokens_total", "counter", "Prompt tokens admitted.", lbl,
	       (double)m->prompt_tokens);
	scalar(o, "vllm:generation_tokens_total", "counter", "Tokens generated.", lbl,
	       (double)m->gen_tokens);
	/* the prefix-cache counters under vLLM's older (gpu_) and newer names;
	 * routers and dashboards read either */
	for (int i = 0; i < 2; i++) {
		char q[64], h[64];
		snprintf(q, sizeof(q), "vllm:%sprefix_cache_queries_total", i ? "" : "gpu_");
		snprintf(h, sizeof(h), "vllm:%sprefix_cache_hits_total", i ? "" : "gpu_");
		scalar(o, q, "counter", "Prompt tokens looked up in the prefix cache.", lbl,
		       (double)m->prefix_queries);
		scalar(o, h, "counter", "Prompt tokens served from the prefix cache.", lbl,
		       (double)m->prefix_hits);
	}
	/* the rate the production-stack router reads */
	scalar(o, "vllm:gpu_prefix_cache_hit_rate", "gauge",
	       "Prefix-cache hits over queries, in tokens, since the start.", lbl,
	       m->prefix_queries ? (double)m->prefix_hits / (double)m->prefix_queries : 0.0);
	/* The Gateway API Inference Extension reads LoRA state from this
	 * family; ferrox serves no adapters. */
	family(o, "vllm:lora_requests_info", "gauge", "LoRA adapters running and waiting (none).");
	out_f(o, "vllm:lora_requests_info{max_lora=\"0\",running_lora_adapters=\"\","
	      "waiting_lora_adapters=\"\"} 0\n");
	scalar(o, "vllm:spec_decode_num_drafts_total", "counter",
	       "Speculative decoding: steps that verified drafts.", lbl, (double)m->spec_drafts);
	scalar(o, "vllm:spec_decode_num_draft_tokens_total", "counter",
	       "Speculative decoding: tokens drafted.", lbl, (double)m->spec_draft_tokens);
	scalar(o, "vllm:spec_decode_num_accepted_tokens_total", "counter",
	       "Speculative decoding: drafted tokens the target sampled too (kept).", lbl,
	       (double)m->spec_accepted);
	family(o, "vllm:request_success_total", "counter", "Finished requests by outcome.");
	out_f(o, "vllm:request_success_total{%s,finished_reason=\"stop\"} %llu\n", model,
	      (unsigned long long)m->req_stop);
	out_f(o, "vllm:request_success_total{%s,finished_reason=\"length\"} %llu\n", model,
	      (unsigned long long)m->req_length);
	out_f(o, "vllm:request_success_total{%s,finished_reason=\"abort\"} %llu\n", model,
	      (unsigned long long)m->req_abort);
	hist(o, "vllm:time_to_first_token_seconds", "Time from arrival to the first token.", model,
	     &m->ttft);
	hist(o, "vllm:inter_token_latency_seconds", "Time between consecutive tokens.", model,
	     &m->itl);
	hist(o, "vllm:e2e_request_latency_seconds", "Time from arrival to the last token.", model,
	     &m->e2e);
	scalar(o, "ferrox_kv_blocks_used", "gauge", "Paged KV blocks holding sequences.", "",
	       m->blocks_used);
	scalar(o, "ferrox_kv_blocks_free", "gauge", "Paged KV blocks free or cached idle.", "",
	       m->blocks_total - m->blocks_used);
	scalar(o, "ferrox_kv_events_total", "counter", "KV-cache events published.", "",
	       (double)m->kv_events);
	scalar(o, "ferrox_kv_event_batches_total", "counter", "KV-event batches sent.", "",
	       (double)m->kv_batches);
	scalar(o, "ferrox_kv_event_batches_dropped_total", "counter",
	       "KV-event batches dropped (the publisher fell behind, or no memory).", "",
	       (double)m->kv_dropped);
	scalar(o, "ferrox_decode_steps_total", "counter", "Batched forward steps run.", "",
	       (double)m->steps);
	scalar(o, "ferrox_batch_rows_total", "counter", "Token rows over all steps.", "",
	       (double)m->step_rows);
	hist(o, "ferrox_step_sequences", "Sequences served by one batched step.", NULL,
	     &m->step_seqs);
	hist(o, "ferrox_step_duration_seconds", "Time of one engine step: the batched forward pass and sampling.", NULL,
	     &m->step_time);
	return o->p != NULL;
}
