/* ferrox serve: the OpenAI-compatible HTTP server (src/server) on one model.
 *
 * SIGTERM and SIGINT start a drain (fx_server_params.should_stop); a second
 * one ends the process at once, as llama-server does, cutting any stream
 * still running. The flag below is the only global mutable state: a signal
 * handler can reach nothing else, and volatile sig_atomic_t is the one type
 * C guarantees it may write. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "ferrox.h"

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	if (g_stop) { /* second signal: its default action, now */
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	g_stop = 1;
}

static bool should_stop(void *arg)
{
	(void)arg;
	return g_stop != 0;
}

/* "8MiB", "512k", "1G", "1048576" -> bytes. */
static bool parse_size(const char *opt, const char *s, size_t *out)
{
	char *end;
	double v = strtod(s, &end);
	double mul = 1;
	if (end == s || v < 1) {
		fprintf(stderr, "error: %s wants a size such as 8MiB or 1048576, got '%s'\n", opt, s);
		return false;
	}
	if (*end == 'k' || *end == 'K')
		mul = 1024, end++;
	else if (*end == 'm' || *end == 'M')
		mul = 1024.0 * 1024, end++;
	else if (*end == 'g' || *end == 'G')
		mul = 1024.0 * 1024 * 1024, end++;
	if (mul > 1 && (*end == 'i' || *end == 'I'))
		end++;
	if (mul > 1 && (*end == 'b' || *end == 'B'))
		end++;
	if (*end || v * mul > 1e12) {
		fprintf(stderr, "error: %s wants a size such as 8MiB or 1048576, got '%s'\n", opt, s);
		return false;
	}
	*out = (size_t)(v * mul);
	return true;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ferrox serve -m MODEL [--host 127.0.0.1] [--port 8080] [--parallel 4]\n"
		"                    [--ctx-size N] [--api-key K] [--timeout S] [--max-body 8MiB]\n"
		"                    [--queue N] [-t N] [--chat-template NAME] [--chat-template-file F]\n"
		"                    [--reasoning-format auto|none|deepseek] [--generation-config auto|none]\n"
		"                    [--spec-type ngram-simple] [--spec-draft-n-max N] [--spec-draft-n-min N]\n"
		"                    [--spec-ngram-simple-size-n N] [--spec-ngram-simple-size-m N]\n"
		"                    [--block-size 16] [--served-model-name NAME]\n"
		"                    [--kv-events-endpoint tcp://HOST:PORT] [--kv-events-replay-endpoint E]\n"
		"                    [--kv-events-topic T] [--kv-events-config JSON] [-sp]\n"
		"                    [-b N] [-ub N] [--no-mmap] [--mlock] [-fa on|off|auto] [-ngl N]\n"
		"                    [--slot-save-path DIR]\n"
		"                    [--embeddings [--pooling last|mean|cls]]\n"
		"OpenAI-compatible server: POST /v1/completions, /v1/chat/completions, /tokenize,\n"
		"/detokenize; GET /v1/models, /health, /metrics. --parallel sequences are decoded\n"
		"together; --ctx-size (vLLM's --max-model-len) is the context of each (default: the\n"
		"model's, at most 4096); --jinja, --metrics and -cb/--cont-batching are accepted:\n"
		"ferrox always does those;\n"
		"--queue requests may wait (default 4 x --parallel), then 503. --timeout: seconds\n"
		"an idle connection is kept (default 600). SIGTERM or Ctrl-C drains (a second one\n"
		"quits at once). --chat-template NAME: a built-in chat template by llama.cpp's name\n"
		"(chatml, gemma, llama2, llama3, mistral, phi3, zephyr, ...; an unknown name lists\n"
		"them all; or Jinja source) used instead of the model's, which a base model needs\n"
		"for /v1/chat/completions; --chat-template-file F: the same, read from a file.\n"
		"--jinja: accepted, a no-op (templates are always Jinja). --reasoning-format:\n"
		"where thinking goes unless a request says (auto, deepseek:\n"
		"message.reasoning_content; none: left in content). --generation-config\n"
		"auto (default, as vLLM): sampling fields a request leaves out (temperature, top_k,\n"
		"top_p, min_p, repetition_penalty) take the model's own defaults\n"
		"(generation_config.json, or the GGUF's general.sampling.* keys); none: OpenAI's.\n"
		"Speculative decoding (ngram-simple; llama-server's flags; a request may override\n"
		"them with the fields \"speculative.n_max\", .n_min, .type, .ngram_size_n,\n"
		".ngram_size_m, or the same in an object \"speculative\": {\"n_max\": 8}; n_max 0: off).\n"
		"The output is what plain decoding gives for the same seed:\n%s"
		"--block-size: tokens per paged KV block, the prefix cache's unit (vLLM's flag).\n"
		"--served-model-name (or -a, --alias): the model's id in /v1/models, replies, metrics.\n"
		"-sp, --special: control tokens (<|im_end|>, ...) shown in the generated text.\n"
		"--ignore-eos: requests run past end-of-generation tokens to max_tokens unless\n"
		"they say \"ignore_eos\": false.\n"
		"--context-shift: a request that fills its context (--ctx-size) keeps the BOS,\n"
		"drops the older half of the rest and goes on (llama-server's); --no-context-shift\n"
		"(the default): it ends with finish_reason \"length\".\n"
		"llama.cpp's loading and batch flags:\n%s"
		"KV-cache events for prefix-aware routers (vllm-router kv_aware, llm-d), in vLLM's\n"
		"format: a ZeroMQ PUB socket bound to --kv-events-endpoint, replays from a ROUTER\n"
		"socket at --kv-events-replay-endpoint, each message's first frame the topic\n"
		"(llm-d: kv@POD@MODEL); or vLLM's --kv-events-config JSON ({\"enable_kv_cache_events\":\n"
		"true, \"endpoint\": ..., \"replay_endpoint\": ..., \"topic\": ...}), which the flags\n"
		"override. GET /kv_event_sources tells routers where they are; GET /kv_cache_blocks\n"
		"lists the blocks the events say this server holds.\n"
		"llama-server's endpoints: POST /completion (its body and stream shapes), GET\n"
		"/props, GET /slots, POST /slots/ID?action=erase, and with --slot-save-path DIR\n"
		"(created if missing) ?action=save and ?action=restore with {\"filename\": NAME}:\n"
		"a slot's tokens and K/V to DIR/NAME and back into the prefix cache.\n"
		"--embeddings (llama-server's flag) enables POST /v1/embeddings: input a string,\n"
		"a list of strings, token ids or lists of them; encoding_format float or base64;\n"
		"dimensions N keeps the first N floats, normalized again. --pooling: last (the\n"
		"default), mean or cls (first token); vectors are L2-normalized.\n",
		cli_spec_help, cli_compat_help);
}

/* Every flag `ferrox serve` takes (cli_flag_known). */
static const char *const serve_own_flags[] = {
	"-h", "--help", "-m", "--model", "--host", "--port", "--parallel", "-np", "--ctx-size", "-c",
	"--api-key", "--timeout", "--max-body", "--queue", "--chat-template-file", "--reasoning-format",
	"--generation-config", "--block-size", "--served-model-name", "--alias", "-a",
	"--kv-events-endpoint", "--kv-events-replay-endpoint", "--kv-events-topic", "--kv-events-config",
	"-t", "--threads", "-sp", "--special", "--context-shift", "--no-context-shift", "--ignore-eos",
	"--chat-template", "--jinja", "--metrics", "-cb", "--cont-batching", "--max-model-len", "--slot-save-path", "--embeddings", "--embedding", "--pooling", NULL,
};
static const char *const *const serve_flags[] = { serve_own_flags, cli_spec_flags, cli_compat_flags, NULL };

int cmd_serve(int argc, char **argv)
{
	struct fx_server_params p = fx_server_default_params();
	const char *tmpl_path = NULL, *tmpl_name = NULL;
	struct cli_compat compat;
	cli_compat_init(&compat);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		long long n;
		if (!cli_flag_known("serve", serve_flags, a))
			return 2;
		int took = cli_spec_opt(argc, argv, &i, &p.spec);
		if (!took)
			took = cli_compat_opt(argc, argv, &i, &compat);
		if (took < 0)
			return 2;
		if (took)
			continue;
#define VAL() do { if (!(v = cli_value(argc, argv, &i))) return 2; } while (0)
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
			VAL(); p.model_path = v;
		} else if (!strcmp(a, "--host")) {
			VAL(); p.host = v;
		} else if (!strcmp(a, "--port")) {
			VAL(); if (!cli_int(a, v, 0, 65535, &n)) return 2; p.port = (int32_t)n;
		} else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) {
			VAL(); if (!cli_int(a, v, 1, 256, &n)) return 2; p.n_parallel = (int32_t)n;
		} else if (!strcmp(a, "--ctx-size") || !strcmp(a, "-c") || !strcmp(a, "--max-model-len")) {
			VAL(); if (!cli_int(a, v, 0, 1 << 22, &n)) return 2; p.n_ctx_seq = (uint32_t)n;
		} else if (!strcmp(a, "--api-key")) {
			VAL(); p.api_key = v;
		} else if (!strcmp(a, "--timeout")) {
			VAL(); if (!cli_int(a, v, 0, 86400, &n)) return 2; p.timeout_s = (int32_t)n;
		} else if (!strcmp(a, "--max-body")) {
			VAL(); if (!parse_size(a, v, &p.max_body)) return 2;
		} else if (!strcmp(a, "--queue")) {
			VAL(); if (!cli_int(a, v, 1, 1 << 20, &n)) return 2; p.max_queue = (int32_t)n;
		} else if (!strcmp(a, "--chat-template-file")) {
			VAL(); tmpl_path = v;
		} else if (!strcmp(a, "--chat-template")) {
			VAL(); tmpl_name = v;
		} else if (!strcmp(a, "--jinja") || !strcmp(a, "--metrics") || !strcmp(a, "-cb") ||
			   !strcmp(a, "--cont-batching")) {
			/* llama.cpp's switches for what ferrox always does: its Jinja
			 * engine, /metrics, continuous batching */
		} else if (!strcmp(a, "--reasoning-format")) {
			VAL();
			if (strcmp(v, "auto") && strcmp(v, "none") && strcmp(v, "deepseek")) {
				fprintf(stderr, "error: --reasoning-format wants auto, none or deepseek, got '%s'\n", v);
				return 2;
			}
			p.reasoning_format = v;
		} else if (!strcmp(a, "--generation-config")) {
			VAL();
			if (strcmp(v, "auto") && strcmp(v, "none")) {
				fprintf(stderr, "error: --generation-config wants auto or none, got '%s'\n", v);
				return 2;
			}
			p.generation_config = !strcmp(v, "auto");
		} else if (!strcmp(a, "--block-size")) {
			VAL(); if (!cli_int(a, v, 1, 1024, &n)) return 2; p.block_size = (uint32_t)n;
		} else if (!strcmp(a, "-sp") || !strcmp(a, "--special")) {
			p.special = true;
		} else if (!strcmp(a, "--ignore-eos")) {
			p.ignore_eos = true;
		} else if (!strcmp(a, "--context-shift") || !strcmp(a, "--no-context-shift")) {
			p.context_shift = !strcmp(a, "--context-shift");
		} else if (!strcmp(a, "--served-model-name") || !strcmp(a, "--alias") || !strcmp(a, "-a")) {
			VAL(); p.served_model_name = v;
		} else if (!strcmp(a, "--kv-events-endpoint")) {
			VAL(); p.kv_events_endpoint = v;
		} else if (!strcmp(a, "--kv-events-replay-endpoint")) {
			VAL(); p.kv_events_replay = v;
		} else if (!strcmp(a, "--kv-events-topic")) {
			VAL(); p.kv_events_topic = v;
		} else if (!strcmp(a, "--kv-events-config")) {
			VAL(); p.kv_events_config = v;
		} else if (!strcmp(a, "--slot-save-path")) {
			VAL(); p.slot_save_path = v;
		} else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
			VAL(); if (!cli_int(a, v, 0, 256, &n)) return 2; p.n_threads = (int32_t)n;
		} else if (!strcmp(a, "--embeddings") || !strcmp(a, "--embedding")) {
			p.embeddings = true;
		} else if (!strcmp(a, "--pooling")) {
			VAL();
			if (!strcmp(v, "last") || !strcmp(v, "mean") || !strcmp(v, "cls")) {
				p.pooling = !strcmp(v, "last") ? FX_POOLING_LAST
					    : !strcmp(v, "mean") ? FX_POOLING_MEAN : FX_POOLING_CLS;
			} else {
				fprintf(stderr, "error: --pooling %s: ferrox pools with last, mean or cls "
					"(none and rank are not supported)\n", v);
				return 2;
			}
		} else { /* listed in serve_own_flags, matched by nothing above */
			fprintf(stderr, "error: ferrox serve: option '%s' is not handled\n", a);
			return 2;
		}
#undef VAL
	}
	struct fx_model_params mp = fx_model_default_params();
	cli_compat_apply(&compat, &mp, &p.n_ubatch);
	p.no_mmap = mp.no_mmap;
	p.mlock = compat.mlock;
	if (!p.model_path) {
		fprintf(stderr, "error: -m MODEL is required\n");
		usage(stderr);
		return 2;
	}
	/* The server listens while it loads (/health answers 503): say at once
	 * when there is nothing to load. */
	struct stat st;
	if (stat(p.model_path, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
		fprintf(stderr, "error: %s: not a model file or checkpoint directory\n", p.model_path);
		return 1;
	}
	if (p.slot_save_path && stat(p.slot_save_path, &st) != 0 && mkdir(p.slot_save_path, 0755)) {
		fprintf(stderr, "error: --slot-save-path %s: cannot create it\n", p.slot_save_path);
		return 1;
	}
	if (p.slot_save_path && (stat(p.slot_save_path, &st) || !S_ISDIR(st.st_mode))) {
		fprintf(stderr, "error: --slot-save-path %s: not a folder\n", p.slot_save_path);
		return 1;
	}
	char *tmpl = NULL;
	if (!cli_chat_template(tmpl_name, tmpl_path, &p.chat_template, &tmpl))
		return 1;
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* a client closing mid-write must not kill us */
	p.should_stop = should_stop;
	struct fx_err err = { 0 };
	int rc = fx_serve(&p, &err);
	free(tmpl);
	if (rc) {
		fprintf(stderr, "error: %s\n", err.msg);
		return 1;
	}
	fprintf(stderr, "serve: stopped\n");
	return 0;
}
