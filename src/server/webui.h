/* The web chat page served at GET / (src/server/webui/index.html: HTML,
 * CSS and JavaScript in one file, no external resources), compiled into
 * the binary by cmake/embed.cmake at build time. */
#ifndef FX_SERVER_WEBUI_H
#define FX_SERVER_WEBUI_H

#include <stddef.h>

/* The page's bytes (UTF-8 HTML; a NUL follows them, not counted in _len),
 * and its ETag: the quoted first 16 hex digits of the file's SHA-1, so a
 * browser's copy is revalidated, and kept, until the binary changes. */
extern const unsigned char srv_webui_html[];
extern const size_t srv_webui_html_len;
extern const char srv_webui_html_etag[];

#endif
