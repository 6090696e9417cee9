/* ferrox chat: interactive terminal chat (placeholder until written). */
#include <stdio.h>

#include "cli.h"
#include "ferrox.h"

int cmd_chat(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "error: chat is not written yet\n");
	return 1;
}
