/* The model's chat template (fx_model_chat_template), copied at load time
 * because the GGUF metadata pages are released after loading: the GGUF key
 * tokenizer.chat_template, or for a Hugging Face directory
 * chat_template.jinja, else tokenizer_config.json's "chat_template" (a
 * string, or a list of {"name", "template"} whose "default" entry is taken,
 * as transformers does). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "model/model.h"

/* Whole file into a malloc'ed NUL-terminated buffer; NULL when absent. */
static char *read_text(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long len;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = fx_malloc_array((size_t)len + 1, 1))) {
		if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
			fx_free(buf);
			buf = NULL;
		} else {
			buf[len] = 0;
			*n = (size_t)len;
		}
	}
	fclose(f);
	return buf;
}

static int from_hf_dir(struct fx_model *m, const char *dir, struct fx_err *err)
{
	char path[4096];
	size_t n = 0;
	snprintf(path, sizeof(path), "%s/chat_template.jinja", dir);
	if ((m->chat_template = read_text(path, &n)))
		return FX_OK;
	snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
	char *text = read_text(path, &n);
	if (!text)
		return FX_OK;
	cJSON *j = cJSON_ParseWithLength(text, n);
	fx_free(text);
	if (!j)
		return fx_fail(err, FX_E_FORMAT, "%s: not valid JSON", path);
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
	const char *s = NULL;
	if (cJSON_IsString(t)) {
		s = t->valuestring;
	} else if (cJSON_IsArray(t)) {
		const cJSON *e;
		cJSON_ArrayForEach(e, t) {
			const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
			const cJSON *tt = cJSON_GetObjectItemCaseSensitive(e, "template");
			if (cJSON_IsString(name) && !strcmp(name->valuestring, "default") && cJSON_IsString(tt))
				s = tt->valuestring;
		}
	}
	int rc = FX_OK;
	if (s && !(m->chat_template = fx_strndup(s, strlen(s))))
		rc = fx_fail(err, FX_E_NOMEM, "no memory");
	cJSON_Delete(j);
	return rc;
}

int model_chat_template_load(struct fx_model *m, const char *path, bool hf, struct fx_err *err)
{
	struct gguf_str s;
	if (hf)
		return from_hf_dir(m, path, err);
	if (!gguf_find(m->g, "tokenizer.chat_template"))
		return FX_OK;
	if (!gguf_get_str(m->g, "tokenizer.chat_template", &s))
		return gguf_type_error(m->g, "tokenizer.chat_template", "string", err);
	if (!(m->chat_template = fx_strndup(s.p, s.n)))
		return fx_fail(err, FX_E_NOMEM, "no memory for the chat template");
	return FX_OK;
}

const char *fx_model_chat_template(const struct fx_model *m)
{
	return m ? m->chat_template : NULL;
}
