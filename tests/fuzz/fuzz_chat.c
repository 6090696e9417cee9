/* libFuzzer target: a chat template (the input) rendered over a fixed
 * conversation with tools, as the server would. */
#include <stdlib.h>
#include <string.h>

#include "ferrox.h"

static const char msgs[] =
	"[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"h\\u00e9llo\"},"
	"{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
	"\"function\":{\"name\":\"f\",\"arguments\":{\"a\":[1,2.5,null]}}}]},"
	"{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"}]";
static const char tools[] =
	"[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
	"\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\"}}}}}]";

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	char *tmpl = malloc(size + 1);
	struct fx_chat_prompt *p = NULL;
	struct fx_err err;
	if (!tmpl)
		return 0;
	memcpy(tmpl, data, size);
	tmpl[size] = 0;
	if (fx_chat_render(tmpl, msgs, tools, NULL, true, "<s>", "</s>", 1, &p, &err) == FX_OK)
		fx_chat_prompt_free(p);
	free(tmpl);
	return 0;
}
