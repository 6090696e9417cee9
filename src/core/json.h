/* JSON parsing (cJSON) that tells a failed allocation from bad JSON. */
#ifndef FX_CORE_JSON_H
#define FX_CORE_JSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Parse text[0..n) (need not be NUL-terminated; trailing bytes after the
 * value are left to the caller: *end gets where the value ended, or where
 * the JSON broke). Returns FX_OK with *out (cJSON_Delete it), FX_E_FORMAT
 * when the text is not JSON, or FX_E_NOMEM.
 * Why a second parse: cJSON returns NULL both for bad JSON and for a failed
 * allocation. Bad JSON breaks at the same byte every time, so a failed
 * parse is repeated once: success (the allocation failure was transient)
 * or a break elsewhere means memory; the same byte means bad JSON. */
int fx_json_parse(const char *text, size_t n, cJSON **out, size_t *end);

#endif
