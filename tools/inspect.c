#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "ferrox.h"

int cmd_inspect(int argc, char **argv)
{
	const char *path = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) {
			if (!(path = cli_value(argc, argv, &i)))
				return 2;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: ferrox inspect -m MODEL.gguf\n");
			return 0;
		} else {
			fprintf(stderr, "error: unknown option '%s'\n", argv[i]);
			return 2;
		}
	}
	if (!path) {
		fprintf(stderr, "error: -m MODEL is required\n");
		return 2;
	}
	struct fx_err err = { 0 };
	char *report;
	if (fx_inspect(path, &report, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		return 1;
	}
	fputs(report, stdout);
	fx_string_free(report);
	return 0;
}
