/* Reading an hf-tiny fixture's references (tests/fixtures/hf-tiny/<name>:
 * reference.json ids, reference.safetensors logits and hidden states). */
#ifndef FX_TESTS_FIXTURE_REF_H
#define FX_TESTS_FIXTURE_REF_H

#include <stdbool.h>
#include <stdio.h>

#include <cJSON.h>

#include "ferrox.h"
#include "io/safetensors.h"

struct ref {
	int32_t prompt[512], all[512], greedy[64];
	int n_prompt, n_all, n_greedy;
	struct st_file *st; /* reference.safetensors (owned: st_close) */
};

static inline int ref_read_ids(const cJSON *o, const char *k, int32_t *out, int cap)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, k);
	const cJSON *e;
	int n = 0;
	cJSON_ArrayForEach(e, a) {
		if (n < cap)
			out[n++] = (int32_t)e->valuedouble;
	}
	return n;
}

/* false when the fixture's references cannot be read. */
static inline bool load_ref(const char *dir, struct ref *r)
{
	char path[512];
	static char buf[1 << 20];
	snprintf(path, sizeof(path), "%s/reference.json", dir);
	FILE *f = fopen(path, "rb");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	cJSON *j = cJSON_Parse(buf);
	if (!j)
		return false;
	r->n_prompt = ref_read_ids(j, "prompt_ids", r->prompt, 512);
	r->n_all = ref_read_ids(j, "all_ids", r->all, 512);
	r->n_greedy = ref_read_ids(j, "greedy_ids", r->greedy, 64);
	cJSON_Delete(j);
	snprintf(path, sizeof(path), "%s/reference.safetensors", dir);
	struct fx_err err;
	return st_open(path, &r->st, &err) == FX_OK && r->n_prompt > 0;
}

#endif
