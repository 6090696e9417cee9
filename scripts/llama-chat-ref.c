/* llama.cpp's own chat formatting, for scripts/make-chat-builtin-refs.py:
 *   llama-chat-ref NAME AGP [ROLE CONTENT]...
 * writes llama_chat_apply_template(NAME, messages, AGP)'s bytes to stdout.
 * Exit 2: bad arguments; 3: llama.cpp does not know NAME (it returned -1).
 * Built by the script against llama.cpp's include/llama.h and libllama;
 * needs no model (the template is chosen by name). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

int main(int argc, char **argv)
{
	if (argc < 3 || (argc - 3) % 2) {
		fprintf(stderr, "usage: %s NAME AGP [ROLE CONTENT]...\n", argv[0]);
		return 2;
	}
	size_t n = (size_t)(argc - 3) / 2;
	struct llama_chat_message *msgs = calloc(n ? n : 1, sizeof(*msgs));
	if (!msgs)
		return 2;
	for (size_t i = 0; i < n; i++) {
		msgs[i].role = argv[3 + 2 * i];
		msgs[i].content = argv[4 + 2 * i];
	}
	bool agp = !strcmp(argv[2], "1");
	int32_t len = llama_chat_apply_template(argv[1], msgs, n, agp, NULL, 0);
	if (len < 0) {
		free(msgs);
		return 3;
	}
	char *buf = malloc((size_t)len + 1);
	if (!buf)
		return 2;
	len = llama_chat_apply_template(argv[1], msgs, n, agp, buf, len + 1);
	fwrite(buf, 1, (size_t)len, stdout);
	free(buf);
	free(msgs);
	return 0;
}
