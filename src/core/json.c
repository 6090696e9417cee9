#include "core/json.h"

#include "core/status.h"

static cJSON *parse_once(const char *text, size_t n, size_t *end)
{
	const char *e = NULL;
	cJSON *j = cJSON_ParseWithLengthOpts(text, n, &e, false);
	*end = e && e >= text ? (size_t)(e - text) : 0;
	return j;
}

int fx_json_parse(const char *text, size_t n, cJSON **out, size_t *end)
{
	size_t e1 = 0, e2 = 0;
	int rc = FX_OK;
	cJSON *j = parse_once(text, n, &e1);
	if (!j) {
		j = parse_once(text, n, &e2);
		rc = j ? FX_OK : e2 == e1 ? FX_E_FORMAT : FX_E_NOMEM;
		if (j)
			e1 = e2;
	}
	if (end)
		*end = e1;
	*out = j;
	return rc;
}
