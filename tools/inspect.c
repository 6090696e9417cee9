#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "ferrox.h"

/* The flags, for the unknown-flag message's suggestion (cli_flag_unknown). */
static const char *const inspect_flag_names[] = {
	"-m", "--model", "-h", "--help", NULL,
};
static const char *const *const inspect_flags[] = { inspect_flag_names, NULL };

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
			cli_flag_unknown("inspect", inspect_flags, argv[i]);
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
