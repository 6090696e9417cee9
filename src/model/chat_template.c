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
#include "core/json.h"
#include "core/status.h"
#include "model/model.h"

/* Whole file into *out, a malloc'ed NUL-terminated buffer (NULL when the
 * file is absent or unreadable: the template is optional). Returns FX_OK or
 * FX_E_NOMEM (a model without its template would be a silent change). */
static int read_text(const char *path, char **out, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long len;
	int rc = FX_OK;
	*out = NULL;
	if (!f)
		return FX_OK;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		if (!(buf = fx_malloc_array((size_t)len + 1, 1))) {
			rc = FX_E_NOMEM;
		} else if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
			fx_free(buf);
			buf = NULL;
		} else {
			buf[len] = 0;
			*n = (size_t)len;
		}
	}
	fclose(f);
	*out = buf;
	return rc;
}

static int from_hf_dir(struct fx_model *m, const char *dir, struct fx_err *err)
{
	char path[4096];
	size_t n = 0;
	char *text = NULL;
	snprintf(path, sizeof(path), "%s/chat_template.jinja", dir);
	int rc = read_text(path, &m->chat_template, &n);
	if (rc || m->chat_template)
		return rc ? fx_fail(err, rc, "%s: out of memory reading it", path) : FX_OK;
	snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
	if ((rc = read_text(path, &text, &n)))
		return fx_fail(err, rc, "%s: out of memory reading it", path);
	if (!text)
		return FX_OK;
	cJSON *j = NULL;
	rc = fx_json_parse(text, n, &j, NULL);
	fx_free(text);
	if (rc == FX_E_NOMEM)
		return fx_fail(err, rc, "%s: out of memory parsing it", path);
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
	rc = FX_OK;
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
